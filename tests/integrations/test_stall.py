"""An agent that goes silent is halted as stalled (P19, "Stop means stop"): the real command
runner reads its pipes as they flow, and one that prints nothing for PACER_STALL_MINUTES is cut
short like a timeout: its process group is killed and the turn is a retryable failure whose
error says it stalled, which the failure policy retries on its backoff. An agent that keeps
printing is never stalled, however long it runs."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from sqlmodel import col, select

from bot.config.settings import load
from bot.runtime.adapters import build_runner
from integrations.runners.command import CommandRunner
from scheduler.engine.turns import submit_turn
from scheduler.errors import ConfigError
from scheduler.ports import Outcome, TurnRequest, TurnResult
from scheduler.store.db import session_scope
from scheduler.store.models import Turn
from scheduler.testing import VirtualDeferrer
from tests.support.custody_support import agent_user
from tests.support.harness import build, new, row

# Prints one line, starts a child that would outlive it, then says nothing for 30 s; on its
# second call (the retry) it answers at once.
SILENT_AGENT = """
import json, os, pathlib, subprocess, sys, time
work = pathlib.Path.cwd()
calls = work / "calls"
n = int(calls.read_text()) + 1 if calls.exists() else 1
calls.write_text(str(n))
if n == 1:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    (work / "child.pid").write_text(str(child.pid))
    print(json.dumps({"type": "system", "subtype": "init", "session_id": "quiet-1"}), flush=True)
    time.sleep(30)
print(json.dumps({"type": "result", "is_error": False, "result": "done after all", "total_cost_usd": 0.01}))
"""

# Prints a line every 0.2 s for 2 s: busy, never silent for as long as the stall.
CHATTY_AGENT = """
import json, time
for i in range(10):
    print(json.dumps({"type": "assistant", "step": i}), flush=True)
    time.sleep(0.2)
print(json.dumps({"type": "result", "is_error": False, "result": "kept talking", "total_cost_usd": 0.01}))
"""


def _agent(tmp_path: Path, source: str) -> str:
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(source))
    return f"{sys.executable} {script} {{prompt}}"


def _runner(tmp_path: Path, source: str, stall_s: float) -> CommandRunner:
    return CommandRunner(_agent(tmp_path, source), "", "quiet", 30, tmp_path / "work", env={"PATH": "/usr/bin:/bin"},
                         kill_grace_s=0.3, stall_s=stall_s)


def _gone(pid: int, timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in {"Z", "X"}:
            return True
        time.sleep(0.02)
    return False


def test_an_agent_silent_for_the_stall_time_is_halted_and_retryable(tmp_path: Path) -> None:
    runner = _runner(tmp_path, SILENT_AGENT, stall_s=1.0)
    started = time.monotonic()
    result = runner.run(TurnRequest(session_id=4, turn_id=1, prompt="work"))
    took = time.monotonic() - started
    assert 1.0 <= took < 3.5, took  # the stall, then the leash's grace; not the agent's 30 s
    assert result.outcome is Outcome.FAILED_RETRYABLE
    assert result.error == (
        "The agent stalled: it printed nothing for 1 second (PACER_STALL_MINUTES); "
        "Pacer killed its process group and will retry it."
    )
    assert result.extra["stalled"] is True
    assert result.agent_session_id == "quiet-1"  # the line it did print still names its conversation
    assert _gone(int((tmp_path / "work" / "session-4" / "child.pid").read_text()))


def test_an_agent_that_keeps_printing_is_not_stalled(tmp_path: Path) -> None:
    result = _runner(tmp_path, CHATTY_AGENT, stall_s=1.0).run(TurnRequest(session_id=5, turn_id=2, prompt="work"))
    assert result.outcome is Outcome.SUCCESS, result.error
    assert result.output == "kept talking" and "stalled" not in result.extra


class RunnerNow:
    """The worker-pool port over a real CommandRunner: the agent really runs, on this thread, and
    its result is reported a minute of virtual time later."""

    def __init__(self, runner: CommandRunner, deferrer: VirtualDeferrer) -> None:
        self.runner, self.deferrer = runner, deferrer

    def submit(self, request: TurnRequest, on_done: Callable[[TurnResult], None]) -> None:
        result = self.runner.run(request)
        self.deferrer.schedule(f"turn-end:{request.turn_id}", self.deferrer.clock.now() + timedelta(minutes=1),
                               on_done, result)

    def halt(self, turn_id: int) -> bool:
        return False


def test_a_stalled_turn_goes_through_the_failure_policy_and_is_retried(engine, clock, tmp_path: Path) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=2, wired=True)
    ctx.ports.workers = RunnerNow(_runner(tmp_path, SILENT_AGENT, stall_s=1.0), deferrer)
    session = new(ctx, title="Quiet", runtime="echo")
    t0 = clock.now()
    assert submit_turn(ctx, session, "fix it").outcome == "started"
    deferrer.run_until(t0 + timedelta(minutes=1, seconds=30))
    stalled = row(ctx, session)
    assert (stalled.status, stalled.hold_reason, stalled.consecutive_failures) == ("waiting", "failed_retryable", 1)
    deferrer.run_until(t0 + timedelta(minutes=4))  # the policy's first retry waits a minute
    with session_scope(engine) as db:
        turns = list(db.exec(select(Turn).where(Turn.session_id == session).order_by(col(Turn.id))))
    assert [t.outcome for t in turns] == ["failed_retryable", "success"]
    assert "The agent stalled" in (turns[0].error or "")
    assert turns[1].started_at - turns[0].finished_at == timedelta(minutes=1)  # type: ignore[operator]
    assert row(ctx, session).status == "done"


def test_pacer_stall_minutes_sets_the_runner_and_bad_values_are_refused(tmp_path: Path) -> None:
    user = {"PACER_AGENT_USER": agent_user() or ""} if os.geteuid() == 0 else {}
    base = {"PACER_RUNNER": "command", "PACER_WORKDIR": str(tmp_path), **user}
    assert load(base, toml_path=None).stall_minutes == 10  # the default
    for minutes, seconds in (("0.5", 30.0), ("10", 600.0), ("0", None)):
        runner = build_runner(load({**base, "PACER_STALL_MINUTES": minutes}, toml_path=None), {"PATH": "/bin"})
        assert isinstance(runner, CommandRunner) and runner.stall_s == seconds
    for bad in ("-1", "ten", "nan", ""):
        with pytest.raises(ConfigError, match=f"PACER_STALL_MINUTES={bad!r}"):
            load({**base, "PACER_STALL_MINUTES": bad}, toml_path=None)
    with pytest.raises(ConfigError, match="stall_s=-1.0: must be a number of seconds >= 0"):
        CommandRunner("agent", "", "x", 30, tmp_path, stall_s=-1.0)
