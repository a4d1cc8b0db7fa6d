"""Weighted capacity and the deference window (seed 000): claims, the run-alone barrier, no
head-of-line blocking, agreement with the gate at weight 1.0, and the two hypothesis properties
over the real queue in virtual time."""

from __future__ import annotations

import random
import tempfile
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import SQLModel

from scheduler.engine.claims import fits, occupied
from scheduler.engine.start_now import start_now
from scheduler.engine.turns import submit_turn
from scheduler.errors import InvalidInput
from scheduler.holds.capacity import deference_window
from scheduler.store import db as dbmod
from scheduler.store.db import session_scope
from scheduler.store.models import Session
from scheduler.store.policy import ensure_policy, load_policy
from scheduler.store.sessions import NewSession, create_session
from scheduler.testing import VirtualClock
from tests.support.harness import build, new, row

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.mark.parametrize(
    ("load", "weight", "budget", "expected"),
    [
        (9.0, 1.0, 10, True),
        (9.5, 1.0, 10, False),
        (8.0, 2.0, 10, True),
        (0.1 + 0.2, 0.7, 1, True),  # float sums still fit exactly
        (9.0, 0.0, 10, True),  # a zero weight claims its turn while there is room
        (10.0, 0.0, 10, False),  # … and waits only while the fleet is exactly full
        (11.0, 0.0, 10, False),  # … or over-committed
        (0.0, 1.0, 1, True),  # the run-alone barrier, alone
        (0.5, 1.0, 1, False),  # … not alone
    ],
)
def test_a_claim_fits_only_within_its_budget(load, weight, budget, expected) -> None:
    assert fits(load, weight, budget) is expected


@pytest.mark.parametrize(
    ("precedence", "seconds"),
    [(5, 0), (0, 0), (-1, 3), (-10, 30), (-20, 60), (-1000, 60)],
)
def test_the_deference_window_is_three_seconds_a_step_capped_at_a_minute(precedence, seconds) -> None:
    assert deference_window(precedence) == timedelta(seconds=seconds)


def test_capacity_zero_is_refused_with_the_migration_message(db, clock) -> None:
    with pytest.raises(InvalidInput, match=r"capacity 0 was the old run-alone spelling; use capacity=1"):
        create_session(db, NewSession(genesis="api", capacity=0), now=clock.now())
    with pytest.raises(InvalidInput, match="weight: must be a finite number >= 0"):
        create_session(db, NewSession(genesis="api", weight=-1), now=clock.now())


def test_at_weight_one_the_gate_and_the_budget_agree_on_a_full_fleet(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=1, turn_minutes=60, wired=True)
    submit_turn(ctx, new(ctx), "busy")
    assert submit_turn(ctx, new(ctx), "waits").reason == "fleet_at_cap"


def test_a_waiter_that_does_not_fit_is_skipped_and_those_behind_it_run(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=4, turn_minutes=60, wired=True)
    for _ in range(2):
        submit_turn(ctx, new(ctx, weight=1.0), "busy")
    heavy = new(ctx, weight=3.0, precedence=10)
    light = new(ctx, weight=1.0, precedence=1)
    sub = submit_turn(ctx, heavy, "heavy")
    assert sub.reason == "fleet_at_cap"  # the gate's own slot check is the weighted one
    assert "its claim of 3.0 does not fit beside the running turns (2.0 of 4 in use, 2 running)" in sub.sentence
    assert submit_turn(ctx, light, "light").outcome == "started"
    deferrer.advance(timedelta(minutes=60))  # the two busy turns end: 1.0 occupied, 3.0 free
    assert row(ctx, heavy).status == "running"


def test_the_run_alone_barrier_waits_while_newer_fitting_work_runs(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=4, turn_minutes=30, wired=True)
    submit_turn(ctx, new(ctx), "busy")
    barrier = new(ctx, capacity=1, genesis="command")  # priority: only its own budget binds it
    sub = submit_turn(ctx, barrier, "alone")
    assert (
        sub.reason == "capacity"
        and sub.sentence == "Waiting for capacity: needs 1.0 · 0.0 free · its own capacity budget 1."
    )
    deferrer.advance(timedelta(minutes=20))
    later = new(ctx)
    assert submit_turn(ctx, later, "later").outcome == "started"  # the barrier is not a fence
    deferrer.advance(timedelta(minutes=10))  # the first ends; `later` still runs
    assert row(ctx, barrier).status == "waiting"
    deferrer.advance(timedelta(minutes=20))
    assert row(ctx, barrier).status == "running"
    assert start_now(ctx, new(ctx)).submission.outcome == "started"  # and after admission, others may start


def test_a_zero_weight_adds_no_load(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=4, turn_minutes=30, wired=True)
    submit_turn(ctx, new(ctx, weight=0.0, genesis="command"), "free rider")
    barrier = new(ctx, capacity=1, genesis="command")
    assert submit_turn(ctx, barrier, "alone").outcome == "started"  # 0 + 1 fits a budget of 1
    zero_alone = new(ctx, weight=0.0, capacity=1, genesis="command")
    sub = submit_turn(ctx, zero_alone, "zero")
    assert sub.reason == "capacity" and "(a zero weight waits only while the fleet is full)" in sub.sentence


def test_deprioritized_work_defers_to_better_work_that_just_arrived(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=1, turn_minutes=20, wired=True)
    busy = new(ctx, genesis="command")
    submit_turn(ctx, busy, "busy")
    low = new(ctx, precedence=-10)
    assert submit_turn(ctx, low, "low").reason == "fleet_at_cap"
    deferrer.advance(timedelta(minutes=19, seconds=50))
    successor = new(ctx)  # chained work: created, its first turn not yet submitted
    deferrer.advance(timedelta(seconds=10))  # the slot frees; the queue pass sees `low` first
    s = row(ctx, low)
    assert s.status == "waiting" and s.hold_reason == "deferring"
    assert s.hold_sentence == (
        f"Deferring for up to 30s (precedence -10) to #{successor}, just arrived and ranked above it; "
        "it claims a slot by 2026-11-02 09:20 UTC at the latest."
    )
    assert s.hold_retry_at == row(ctx, successor).created_at + timedelta(seconds=30)
    assert submit_turn(ctx, successor, "next step").outcome == "started"
    deferrer.run_until(s.hold_retry_at)
    assert row(ctx, low).hold_reason == "fleet_at_cap"  # it yielded the slot it would have raced for


def test_the_window_is_bounded_and_default_work_never_defers(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=2, turn_minutes=20, wired=True)
    low = new(ctx, precedence=-3)
    new(ctx)  # arrives and never submits
    sub = submit_turn(ctx, low, "low")
    assert sub.reason == "deferring" and sub.retry_at == clock.now() + timedelta(seconds=9)
    deferrer.advance(timedelta(seconds=9))
    assert row(ctx, low).status == "running"
    default = new(ctx)
    new(ctx, precedence=5)
    assert submit_turn(ctx, default, "x").outcome == "started"


# --------------------------------------------------------------------------- properties

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
WEIGHTS = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0])
WAITER = st.tuples(
    WEIGHTS, st.one_of(st.none(), st.integers(min_value=1, max_value=4)), st.integers(min_value=5, max_value=90)
)


_shared: dict[str, object] = {}


def _world(max_sessions: int):
    """One SQLite file for every example, emptied between them (creating the schema per example
    would cost more than the example)."""
    if "engine" not in _shared:
        path = tempfile.mkdtemp(prefix="pacer-capacity-")
        _shared["engine"] = dbmod.make_engine(f"sqlite:///{path}/pacer.db")
        SQLModel.metadata.create_all(_shared["engine"])
    engine = _shared["engine"]
    with engine.begin() as conn:
        for table in reversed(SQLModel.metadata.sorted_tables):
            conn.execute(table.delete())
    with session_scope(engine) as db:
        ensure_policy(db, {"preemption_enabled": False})
    clock = VirtualClock(T0)
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=max_sessions, wired=True)
    return engine, clock, ctx, deferrer, workers


def _budget(s: Session, budget_slots: int) -> float:
    return float(s.capacity) if s.capacity is not None else float(budget_slots)


def _fitting_waiters(ctx) -> list[int]:
    """Held sessions that the rules say could start now: a slot free by the gate's count, and
    its claim fitting its own budget beside the weighted load."""
    with session_scope(ctx.engine) as db:
        budget_slots = load_policy(db).slots(ctx.limits.agent_workers)
        load, count = occupied(db, ctx)
        waiting = db.exec(
            Session.__table__.select().where(Session.status == "waiting", Session.hold_reason.is_not(None))  # type: ignore[attr-defined]
        ).all()
        return [w.id for w in waiting if count < budget_slots and fits(load, w.weight, _budget(w, budget_slots))]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    max_sessions=st.integers(min_value=1, max_value=4),
    waiters=st.lists(WAITER, min_size=1, max_size=6),
    seed=st.integers(0, 1000),
)
def test_admission_never_exceeds_the_weighted_budget_and_never_blocks_a_fitting_waiter(
    max_sessions, waiters, seed
) -> None:
    engine, _clock, ctx, deferrer, workers = _world(max_sessions)
    admitted: list[tuple[float, float, float]] = []  # (load before, weight, budget) at each start

    def watch(work, session, decision) -> None:
        load, _count = occupied(work.db, work.ctx, exclude_id=session.id)
        admitted.append(
            (load, session.weight, _budget(session, load_policy(work.db).slots(work.ctx.limits.agent_workers)))
        )

    ctx.plugins.before_start.append(watch)
    minutes = {}
    ids = []
    for weight, capacity, duration in waiters:
        sid = new(ctx, weight=weight, capacity=capacity)
        minutes[sid] = duration
        ids.append(sid)
    workers.duration = lambda r: timedelta(minutes=minutes[r.session_id])
    random.Random(seed).shuffle(ids)
    for sid in ids:
        submit_turn(ctx, sid, f"work {sid}")
        assert _fitting_waiters(ctx) == []
    while workers.running:  # to each turn's end; held sessions' alarms fire on the way
        deferrer.run_until(min(deferrer.next_run(f"turn-end:{t}") for t in workers.running))
        assert _fitting_waiters(ctx) == []
    for load, weight, budget in admitted:
        assert fits(load, weight, budget), (load, weight, budget)
    with session_scope(engine) as db:
        for sid in ids:
            s = db.get(Session, sid)
            alone = fits(0.0, s.weight, _budget(s, max_sessions))
            assert (s.started_at is not None) is alone, (sid, s.weight, s.capacity)  # what fits alone, ran
