"""A running turn's progress reaches the store and the notifiers (P19, "Live progress"): the real
command runner reads an agent's stream, the worker pool's progress book keeps the latest on the
turn's row (real SQLite and PostgreSQL), spaced, and tells the notifier chain; `Spacing` keeps
each key's calls a gap apart and within an hourly bucket, the last ask always answered."""

from __future__ import annotations

import shlex
import sys
import textwrap
import threading
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from integrations.runners.command import CommandRunner
from integrations.runners.pool import ThreadWorkerPool
from integrations.spacing import Spacing
from integrations.turn_leases import LeasedPool
from integrations.turn_progress import ProgressBook
from scheduler.engine.leases import record_progress
from scheduler.engine.turns import submit_turn
from scheduler.store.db import session_scope
from scheduler.store.models import Turn
from scheduler.store.turn_reads import running_progress
from tests.support.harness import build, new

LEASE = timedelta(seconds=30)


def _wait(check: Any, seconds: float = 10.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.02)
    raise AssertionError(f"waited {seconds}s")


def test_spacing_keeps_a_gap_per_key_and_answers_the_last_ask() -> None:
    calls: list[tuple[str, float]] = []
    spacing: Spacing[str] = Spacing(0.3, lambda key: calls.append((key, time.monotonic())), name="t")
    for _ in range(5):
        spacing.ask("a")  # the first at once, the other four answered by one call a gap later
    spacing.ask("b")  # another key is not held back by "a"
    assert [key for key, _ in calls] == ["a", "b"]
    _wait(lambda: len(calls) == 3)
    time.sleep(0.4)
    assert [key for key, _ in calls] == ["a", "b", "a"] and calls[2][1] - calls[0][1] >= 0.3
    spacing.mark("a")  # it ran unasked: the next waits a gap from now
    marked = time.monotonic()
    spacing.ask("a")
    _wait(lambda: len(calls) == 4)
    assert calls[3][1] - marked >= 0.29
    spacing.ask("a")
    spacing.drop("a")  # the armed call is disarmed
    time.sleep(0.4)
    assert len(calls) == 4


def test_spacing_holds_all_keys_to_the_hourly_bucket() -> None:
    calls: list[int] = []
    # 36,000 an hour is one every 0.1 s; a bucket of two lets two go at once.
    spacing: Spacing[int] = Spacing(0.0, calls.append, name="t", per_hour=36_000, burst=2)
    started = time.monotonic()
    for key in range(4):
        spacing.ask(key)
    assert calls == [0, 1]
    _wait(lambda: len(calls) == 4)
    assert sorted(calls) == [0, 1, 2, 3] and time.monotonic() - started >= 0.15


class Notices:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any], float]] = []
        self.lock = threading.Lock()

    def notify(self, event: str, context: Mapping[str, Any]) -> None:
        with self.lock:
            self.seen.append((event, dict(context), time.monotonic()))


# Prints a TodoWrite, then a tool call every 0.1 s for 1.5 s, then its result.
AGENT = """
import json, time
def say(obj):
    print(json.dumps(obj), flush=True)
say({"type": "system", "subtype": "init", "session_id": "live-2"})
todos = [{"content": "Read", "status": "in_progress", "activeForm": "Reading"},
         {"content": "Fix", "status": "pending", "activeForm": "Fixing"}]
todo = {"type": "tool_use", "name": "TodoWrite", "input": {"todos": todos}}
say({"type": "assistant", "message": {"content": [todo]}})
for i in range(15):
    say({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Grep",
        "input": {"pattern": f"step{i}"}}]}})
    time.sleep(0.1)
time.sleep(1.0)
say({"type": "result", "is_error": False, "result": "fixed", "total_cost_usd": 0.02})
"""


def test_a_running_turns_progress_is_kept_on_its_row_spaced_and_told(any_engine, clock, tmp_path: Path) -> None:
    ctx, _, _, _ = build(any_engine, clock, max_sessions=2)
    ctx.owner, ctx.limits.turn_lease = "a", LEASE
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(AGENT))
    runner = CommandRunner(f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {{prompt}}", "", "live", 60,
                           tmp_path / "work", env={"PATH": "/usr/bin:/bin"})
    notices = Notices()
    book = ProgressBook(any_engine, "a", notices.notify, clock.now, gap=0.5)
    pool = LeasedPool(ThreadWorkerPool(runner, 1), any_engine, "a", LEASE, clock.now, progress=book)
    ctx.ports.workers = pool
    try:
        sid = new(ctx, prompt="look")
        submit_turn(ctx, sid, "look")

        def seen() -> dict[str, Any] | None:
            with session_scope(any_engine) as db:
                found = running_progress(db, [sid], clock.now()).get(sid)
                return found if found and found["tool"] == "Grep" and found["detail"] == "step14" else None

        shown = _wait(seen)  # the last call of the burst is written, while the turn still runs
        assert shown["todos"] == [{"content": "Read", "status": "in_progress", "active_form": "Reading"},
                                  {"content": "Fix", "status": "pending", "active_form": "Fixing"}]
        assert shown["progress_at"] == clock.now() and shown["tools_used"] == 16
        assert (shown["elapsed_s"], shown["cost_usd"]) == (0, 0.0)  # the virtual clock stands still
        _wait(lambda: not pool.running())
    finally:
        pool.shutdown(wait=True, halt=True)
    told = [(context, at) for event, context, at in notices.seen if event == "progress"]
    assert 3 <= len(told) <= 6, told  # 1.5 s of calls at one write every 0.5 s, not sixteen
    assert all(context["session_id"] == sid for context, _ in told)
    assert all(b - a >= 0.45 for (_, a), (_, b) in zip(told, told[1:], strict=False))
    with session_scope(any_engine) as db:
        turn = db.get(Turn, told[0][0]["turn_id"])
        assert turn is not None and turn.status == "done"
        assert running_progress(db, [sid], clock.now()) == {}  # the turn has ended: nothing runs


def test_progress_is_written_only_on_the_owners_running_turn(any_engine, clock) -> None:
    ctx, _, _, _ = build(any_engine, clock, max_sessions=2)
    ctx.owner, ctx.limits.turn_lease = "a", LEASE
    sid = new(ctx, prompt="look")
    submit_turn(ctx, sid, "look")
    with session_scope(any_engine) as db:
        turn_id = db.exec(Turn.__table__.select()).first().id  # type: ignore[attr-defined]
    plain = {"tool": "Read", "detail": None, "todos": None, "cost_usd": None, "tools_used": 1}
    assert record_progress(any_engine, turn_id, "b", plain, clock.now()) is None  # recovered elsewhere
    assert record_progress(any_engine, turn_id + 1, "a", plain, clock.now()) is None  # no such turn
    assert record_progress(any_engine, turn_id, "a", plain, clock.now()) == sid
    with session_scope(any_engine) as db:
        assert running_progress(db, [sid], clock.now())[sid]["tool"] == "Read"


def test_a_spacing_that_must_not_run_inline_runs_on_a_timer_at_once() -> None:
    threads: list[str] = []
    spacing: Spacing[int] = Spacing(0.2, lambda key: threads.append(threading.current_thread().name), name="w",
                                    inline=False)
    spacing.ask(1)  # due now: run at once, but not on the asker's thread (a pipe's reader)
    _wait(lambda: threads)
    spacing.ask(1)
    _wait(lambda: len(threads) == 2)
    assert threads == ["pacer-w", "pacer-w"]
