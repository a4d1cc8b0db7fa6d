"""No head-of-line blocking (seed 000, "non-fitting waiters are skipped"; seed 002, "One run per
project"): however many higher-ranked sessions wait on a busy group or on their own capacity, a
freed slot goes to the first session that fits — on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import event

from scheduler.engine.queue_pass import queue_pass
from scheduler.engine.turns import submit_turn
from scheduler.holds.groups import repository_group
from scheduler.holds.operator import place_hold
from scheduler.holds.prerequisites import REASON as PREREQUISITE
from scheduler.ports import Outcome
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Status
from scheduler.store.prerequisite_rows import record_prerequisites
from tests.support.harness import build, new, row
from tests.support.holdkit import finish

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

API = repository_group("acme/api")


def test_a_freed_slot_goes_past_thirty_sessions_waiting_on_a_busy_group(any_engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(any_engine, clock, max_sessions=2, turn_minutes=600, wired=True)
    occupant = new(ctx, genesis="schedule", concurrency_group=API, precedence=5)
    filler = new(ctx, genesis="schedule")
    assert submit_turn(ctx, occupant, "a").outcome == "started"
    assert submit_turn(ctx, filler, "b").outcome == "started"
    blocked = [new(ctx, genesis="schedule", concurrency_group=API, precedence=5) for _ in range(30)]
    for sid in blocked:
        assert submit_turn(ctx, sid, "x").reason == "concurrency_group"
    fitting = new(ctx, genesis="schedule")
    assert submit_turn(ctx, fitting, "y").reason == "fleet_at_cap"

    finish(ctx, workers, deferrer, filler, Outcome.SUCCESS)  # a slot frees; the pass it asks for runs

    assert row(ctx, fitting).status == Status.RUNNING.value
    assert all(row(ctx, sid).status == Status.WAITING.value for sid in blocked)


def test_a_freed_slot_goes_past_forty_busy_groups(any_engine, clock) -> None:
    """Forty groups, each busy, each with a waiter ranked above the one session that fits."""
    ctx, deferrer, workers, _quota = build(any_engine, clock, max_sessions=41, turn_minutes=600, burn=0.001, wired=True)
    ctx.limits.agent_workers = 41  # the worker pool bounds the slots: as many workers as slots
    groups = [repository_group(f"acme/r{i}") for i in range(40)]
    for group in groups:
        assert submit_turn(ctx, new(ctx, genesis="schedule", concurrency_group=group), "run").outcome == "started"
    filler = new(ctx, genesis="schedule")
    assert submit_turn(ctx, filler, "b").outcome == "started"
    waiters = [new(ctx, genesis="schedule", concurrency_group=group, precedence=3) for group in groups]
    for sid in waiters:
        assert submit_turn(ctx, sid, "x").reason == "concurrency_group"
    fitting = new(ctx, genesis="schedule")
    assert submit_turn(ctx, fitting, "y").reason == "fleet_at_cap"

    finish(ctx, workers, deferrer, filler, Outcome.SUCCESS)

    assert row(ctx, fitting).status == Status.RUNNING.value
    assert all(row(ctx, sid).status == Status.WAITING.value for sid in waiters)


def test_a_freed_slot_goes_past_thirty_sessions_that_must_run_alone(any_engine, clock) -> None:
    """Seed 000's run-alone barrier (`capacity=1`): thirty such waiters ranked higher cannot start
    beside a running session, and the plain session behind them can."""
    ctx, deferrer, workers, _quota = build(any_engine, clock, max_sessions=2, turn_minutes=600, wired=True)
    running = new(ctx, genesis="schedule")
    filler = new(ctx, genesis="schedule")
    assert submit_turn(ctx, running, "a").outcome == "started"
    assert submit_turn(ctx, filler, "b").outcome == "started"
    alone = [new(ctx, genesis="schedule", capacity=1, precedence=5) for _ in range(30)]
    for sid in alone:
        assert submit_turn(ctx, sid, "x").outcome == "held"
    fitting = new(ctx, genesis="schedule")
    assert submit_turn(ctx, fitting, "y").reason == "fleet_at_cap"

    finish(ctx, workers, deferrer, filler, Outcome.SUCCESS)

    assert row(ctx, fitting).status == Status.RUNNING.value
    assert all(row(ctx, sid).status == Status.WAITING.value for sid in alone)


def test_a_pass_with_nothing_that_fits_starts_nothing_and_keeps_every_record(any_engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(any_engine, clock, max_sessions=5, turn_minutes=600, wired=True)
    assert submit_turn(ctx, new(ctx, genesis="schedule", concurrency_group=API), "a").outcome == "started"
    waiters = [new(ctx, genesis="schedule", concurrency_group=API) for _ in range(60)]
    for sid in waiters:
        assert submit_turn(ctx, sid, "x").reason == "concurrency_group"

    assert queue_pass(ctx) == []
    assert {row(ctx, sid).hold_reason for sid in waiters} == {"concurrency_group"}


def test_a_pass_over_hundreds_waiting_on_one_busy_group_reads_a_bounded_number_of_statements(engine, clock) -> None:
    """Blocked work is passed over by group, not read a row at a time: six hundred waiters on one
    busy group cost the pass what thirty do."""
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=5, turn_minutes=600, wired=True)
    assert submit_turn(ctx, new(ctx, genesis="schedule", concurrency_group=API), "a").outcome == "started"

    def statements_of_one_pass(waiting: int) -> int:
        for _ in range(waiting):
            assert (
                submit_turn(ctx, new(ctx, genesis="schedule", concurrency_group=API), "x").reason == "concurrency_group"
            )
        seen: list[str] = []
        listener = lambda *args: seen.append(args[2])  # noqa: E731 (conn, cursor, statement, …)
        event.listen(engine, "before_cursor_execute", listener)
        try:
            assert queue_pass(ctx) == []
        finally:
            event.remove(engine, "before_cursor_execute", listener)
        return len(seen)

    statements_of_one_pass(1)  # the first pass over a waiter reads what later ones keep (the triggers' group limits)
    few = statements_of_one_pass(30)
    many = statements_of_one_pass(570)
    assert many == few


def test_a_freed_slot_goes_past_thirty_sessions_under_an_operator_hold(any_engine, clock) -> None:
    """Seed 001's no head-of-line blocking with holds in use: thirty `genesis:schedule` sessions
    under one operator hold, ranked above the one session that fits, cost the pass nothing."""
    ctx, deferrer, workers, _quota = build(any_engine, clock, max_sessions=1, turn_minutes=600, wired=True)
    running = new(ctx, genesis="api")
    assert submit_turn(ctx, running, "a").outcome == "started"
    place_hold(ctx, "genesis", ["schedule"], armer="U_OPS", reason="cron storm")
    held = [new(ctx, genesis="schedule", precedence=9) for _ in range(30)]
    for sid in held:
        assert submit_turn(ctx, sid, "x").reason == "operator_hold"
    fitting = new(ctx, genesis="api")
    assert submit_turn(ctx, fitting, "y").reason == "fleet_at_cap"

    finish(ctx, workers, deferrer, running, Outcome.SUCCESS)  # a slot frees; the pass it asks for runs

    assert row(ctx, fitting).status == Status.RUNNING.value
    assert all(row(ctx, sid).status == Status.WAITING.value for sid in held)


def test_a_freed_slot_goes_past_thirty_sessions_waiting_on_a_prerequisite(any_engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(any_engine, clock, max_sessions=2, turn_minutes=600, wired=True)
    target = new(ctx, genesis="api", title="migrate")
    filler = new(ctx, genesis="api")
    assert submit_turn(ctx, target, "a").outcome == "started"
    assert submit_turn(ctx, filler, "b").outcome == "started"
    waiters = []
    for _ in range(30):
        sid = new(ctx, genesis="schedule", precedence=9)
        with session_scope(ctx.engine) as db:
            record_prerequisites(db, db.get(Session, sid), f"@#{target}")
        waiters.append(sid)
        assert submit_turn(ctx, sid, "x").outcome == "held"
    assert row(ctx, waiters[0]).hold_reason == PREREQUISITE
    fitting = new(ctx, genesis="api")
    assert submit_turn(ctx, fitting, "y").reason == "fleet_at_cap"

    finish(ctx, workers, deferrer, filler, Outcome.SUCCESS)

    assert row(ctx, fitting).status == Status.RUNNING.value
    assert all(row(ctx, sid).status == Status.WAITING.value for sid in waiters)
