"""A running turn has an owner and a lease (P12): recovery, on whichever process sweeps, takes
only turns whose owner stopped renewing them, each once, and a late report or a stalled owner
cannot run a turn a second time. Two contexts on one database stand for two processes."""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import create_engine
from sqlmodel import col, select

from integrations.runners.command import CommandRunner
from integrations.runners.echo import EchoRunner
from integrations.runners.invocation import build_argv
from integrations.runners.pool import ThreadWorkerPool
from integrations.turn_leases import LeasedPool
from scheduler.context import Context
from scheduler.engine.completion import complete_turn
from scheduler.engine.leases import renew
from scheduler.engine.lifecycle import recover, recover_lost_turns
from scheduler.engine.turns import submit_turn
from scheduler.ports import Outcome, TurnRequest, TurnResult
from scheduler.store.db import session_scope
from scheduler.store.models import Turn
from tests.support.harness import build, new, row
from tests.support.paths import FIXTURES

LEASE = timedelta(seconds=30)
FAKE = FIXTURES / "fake_claude.py"


def process(engine, clock, owner: str):
    ctx, deferrer, workers, _ = build(engine, clock, max_sessions=4)
    ctx.owner, ctx.limits.turn_lease = owner, LEASE
    return ctx, deferrer, workers


def turns(ctx: Context, session_id: int) -> list[Turn]:
    with session_scope(ctx.engine) as db:
        return list(db.exec(select(Turn).where(Turn.session_id == session_id).order_by(col(Turn.id))).all())


def test_recovery_takes_only_the_turns_whose_lease_ran_out_each_once(any_engine, clock) -> None:
    a, _, a_workers = process(any_engine, clock, "a")
    b, b_deferrer, b_workers = process(any_engine, clock, "b")
    sa, sb = new(a, prompt="a's work"), new(b, prompt="b's work")
    submit_turn(a, sa, "a's work")
    submit_turn(b, sb, "b's work")
    [ta], [tb] = turns(a, sa), turns(b, sb)
    assert (ta.owner, tb.owner) == ("a", "b")
    assert ta.lease_expires_at == tb.lease_expires_at == clock.now() + LEASE

    # b is elected while a still runs: neither turn is b's to take, its own least of all.
    assert recover(b) == {"interrupted": 0, "first_turns": 0}
    clock.advance(LEASE / 2)
    assert renew(any_engine, "b", [tb.id, ta.id], clock.now() + LEASE) == {tb.id}  # b beats for its own only
    clock.advance(LEASE / 2 + timedelta(seconds=1))  # a, killed, has stopped beating

    assert recover_lost_turns(b) == 1
    assert recover_lost_turns(b) == 0  # taken once
    [lost], [kept] = turns(a, sa), turns(b, sb)
    assert (lost.status, lost.outcome, kept.status) == ("failed", "interrupted", "running")
    assert renew(any_engine, "a", [ta.id], clock.now() + LEASE) == set()  # a stalled owner finds it gone

    complete_turn(a, ta.id or 0, TurnResult(Outcome.SUCCESS, output="late"))  # a's late report
    assert turns(a, sa)[0].status == "failed"

    b_deferrer.advance(timedelta(seconds=1))  # the interrupted turn's re-check, due now, on b
    assert [r.prompt for r in b_workers.submitted] == ["b's work", "a's work"]
    assert [r.prompt for r in a_workers.submitted] == ["a's work"]
    again = turns(b, sa)
    assert [(t.status, t.owner) for t in again] == [("failed", "a"), ("running", "b")]


def test_a_heartbeat_keeps_its_turns_and_halts_one_recovered_elsewhere(any_engine, clock) -> None:
    a, _, _ = process(any_engine, clock, "a")
    b, _, _ = process(any_engine, clock, "b")
    pool = LeasedPool(ThreadWorkerPool(EchoRunner(30, 0), 2), any_engine, "a", LEASE, clock.now)
    a.ports.workers = pool
    try:
        sa = new(a, prompt="long work")
        submit_turn(a, sa, "long work")
        [turn] = turns(a, sa)
        assert pool.running() == [turn.id]

        clock.advance(LEASE * 2 / 3)
        assert pool.beat() == []
        assert turns(a, sa)[0].lease_expires_at == clock.now() + LEASE
        assert recover_lost_turns(b) == 0  # renewed: its owner is alive

        clock.advance(LEASE + timedelta(seconds=1))  # a stalls past its lease; b sweeps
        assert recover_lost_turns(b) == 1
        assert pool.beat() == [turn.id]  # a wakes, finds the turn taken, and stops it
        deadline = time.monotonic() + 10
        while pool.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.running() == []
        [ended] = turns(a, sa)
        assert (ended.status, ended.outcome) == ("failed", "interrupted")  # the halted report changed nothing
    finally:
        pool.shutdown(wait=True)


def test_a_process_never_gives_back_a_turn_its_own_agent_still_runs(any_engine, clock) -> None:
    """A renewal late behind a busy database (on SQLite, one writer at a time; the busy timeout
    is 30 s) lets the lease of a turn run out while its agent works here. The process's own lease
    sweep must not give that turn back: it would run the prompt a second time beside the first.
    Another process's sweep still may, as the lease promises."""
    a, _, _ = process(any_engine, clock, "a")
    b, _, _ = process(any_engine, clock, "b")
    pool = LeasedPool(ThreadWorkerPool(EchoRunner(30, 0), 2), any_engine, "a", LEASE, clock.now)
    a.ports.workers = pool
    try:
        sa = new(a, prompt="long work")
        submit_turn(a, sa, "long work")
        [turn] = turns(a, sa)
        clock.advance(LEASE + timedelta(seconds=1))  # no beat landed in time

        assert recover_lost_turns(a) == 0  # its own sweep: the agent runs here
        assert turns(a, sa)[0].status == "running" and pool.running() == [turn.id]
        assert pool.beat() == []  # the late renewal finds the turn still its own
        assert turns(a, sa)[0].lease_expires_at == clock.now() + LEASE

        clock.advance(LEASE + timedelta(seconds=1))
        assert recover_lost_turns(b) == 1  # another process cannot know: the lease decides
        assert pool.beat() == [turn.id]
    finally:
        pool.shutdown(wait=True, halt=True)


def test_a_process_that_cannot_renew_halts_its_turns_before_its_lease_runs_out(tmp_path: Path) -> None:
    (tmp_path / "not-a-directory").write_text("")
    unreachable = create_engine(f"sqlite:///{tmp_path}/not-a-directory/pacer.db")  # every renewal fails
    reports: list[TurnResult] = []
    reported = threading.Event()
    pool = LeasedPool(
        ThreadWorkerPool(EchoRunner(30, 0), 1), unreachable, "a", timedelta(seconds=0.6), lambda: datetime.now(UTC)
    )
    try:
        pool.submit(
            TurnRequest(session_id=1, turn_id=1, prompt="long work"), lambda r: (reports.append(r), reported.set())
        )
        assert reported.wait(10), "the turn ran on with no lease behind it"
        assert [r.outcome for r in reports] == [Outcome.HALTED] and pool.running() == []
    finally:
        pool.shutdown(wait=True)
        unreachable.dispose()


def test_a_turn_cut_off_after_its_agent_named_its_session_re_runs_with_resume(
    any_engine, clock, tmp_path: Path
) -> None:
    """The agent's first line names its conversation; its process then stalls past its lease. The
    id is on the session before any result, so the turn recovered elsewhere resumes it."""
    a, _, _ = process(any_engine, clock, "a")
    b, b_deferrer, b_workers = process(any_engine, clock, "b")
    template = (
        f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} -p {{prompt}} --output-format stream-json --verbose"
    )
    runner = CommandRunner(template, "--resume {agent_session_id}", "claude_code", 60, tmp_path / "work",
                           env={"PATH": "/usr/bin:/bin"})
    pool = LeasedPool(ThreadWorkerPool(runner, 1), any_engine, "a", LEASE, clock.now)
    a.ports.workers = pool
    prompt = "[fake:stream][fake:slow=30] long work"
    try:
        sa = new(a, prompt=prompt)
        submit_turn(a, sa, prompt)
        deadline = time.monotonic() + 10
        while row(a, sa).agent_session_id is None and time.monotonic() < deadline:
            time.sleep(0.05)
        said = row(a, sa).agent_session_id
        pid = json.loads((tmp_path / "work" / f"session-{sa}" / "fake_call.json").read_text())["pid"]
        assert said == f"fake-{pid}"
        [turn] = turns(a, sa)
        assert turn.status == "running"  # recorded while the agent works, before any result

        clock.advance(LEASE + timedelta(seconds=1))  # a stalls past its lease; b sweeps
        assert recover_lost_turns(b) == 1
        b_deferrer.advance(timedelta(seconds=1))
        again = b_workers.submitted[-1]
        assert (again.session_id, again.agent_session_id) == (sa, said)
        argv = build_argv(runner.words, runner.resume_words, again, tmp_path).argv
        assert argv[-2:] == ["--resume", said]
        assert pool.beat() == [turn.id]  # a wakes and stops its run: the conversation goes on on b
        deadline = time.monotonic() + 10
        while pool.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.running() == [] and row(a, sa).agent_session_id == said
    finally:
        pool.shutdown(wait=True, halt=True)
