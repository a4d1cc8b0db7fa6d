"""The demand-aware pace through the real engine and store (issue 32, P20 item 1): the snapshot's
demand is read from the database — what waits, what runs, and the arrivals Pacer's own history
shows — and a spot session the curve alone would hold starts when that demand fits, holds when
it does not, and holds as before with the switch off. The history is read once an hour."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import event

from scheduler.engine.fleet import demand_now
from scheduler.engine.turns import submit_turn
from scheduler.rules.demand import HOURS_OF_WEEK
from scheduler.steering.gate_card import build_card, render_card
from scheduler.store.db import session_scope
from scheduler.store.demand_reads import WAITING_COUNTED, learned, waiting_by_runtime
from scheduler.store.policy import change_policy
from tests.support.harness import build, new, row

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def scene(engine, clock):
    """Two hours of history (two api sessions of one 20-minute $2 turn), then a 5-hour window with
    $60 of its $80 spot budget left over four hours: $0.25/min sustainable, so two running spot
    turns ($0.20/min) and a third ($0.10/min) are ahead of the curve."""
    ctx, deferrer, _workers, quota = build(engine, clock, max_sessions=10, turn_minutes=20, burn=0.1)
    for i in range(2):
        assert submit_turn(ctx, new(ctx, prompt=f"earlier {i}"), f"earlier {i}").outcome == "started"
        deferrer.advance(timedelta(minutes=30))
    deferrer.advance(timedelta(hours=1))
    quota.capacity_5h, quota.spent_5h, quota.reset_5h = 100.0, 20.0, clock.now() + timedelta(hours=4)
    running = [submit_turn(ctx, new(ctx, prompt=f"run {i}"), f"run {i}") for i in range(2)]
    assert [s.outcome for s in running] == ["started", "started"]  # the first under the idle-fleet waiver
    return ctx, deferrer, quota


def test_the_curve_is_let_through_when_the_demand_fits(engine, clock) -> None:
    ctx, _deferrer, quota = scene(engine, clock)
    third = new(ctx, prompt="third")
    assert submit_turn(ctx, third, "third").outcome == "started"
    with session_scope(engine) as db:
        demand = demand_now(db, ctx)
    assert demand is not None and demand.arrivals_per_hour is not None
    assert len(demand.running) == 3 and not demand.waiting_overflow
    with session_scope(engine) as db:
        card = build_card(db, ctx, quota.read(clock.now()), clock.now())
    assert card.as_dict()["decision"]["pace_mode"] == "demand"
    text = render_card(card)
    assert "the pace does not hold: the 5-hour window is ahead of its curve, but all it can still be asked" in text
    assert "Pace: demand-aware — the fleet is ahead of the 5-hour curve and the window's demand, $" in text
    assert "fits with a 50% margin in its $60.00 spot budget left, so the demand decided: the pace does not hold." in (
        text
    )


def test_the_curve_holds_as_before_with_the_switch_off(engine, clock) -> None:
    ctx, *_ = scene(engine, clock)
    with session_scope(engine) as db:
        change_policy(db, {"demand_pacing": "off"}, surface="test", actor=None, now=clock.now())
    third = new(ctx, prompt="third")
    assert submit_turn(ctx, third, "third").outcome == "held"
    assert row(ctx, third).hold_reason == "at_utilization_limit"


def test_a_backlog_that_does_not_fit_holds_on_the_curve(engine, clock) -> None:
    ctx, *_ = scene(engine, clock)
    backlog = [new(ctx, prompt=f"queued {i}") for i in range(30)]  # 30 x 20 min x $0.10: $60, with the margin $90
    assert submit_turn(ctx, backlog[0], "queued 0").outcome == "held"
    assert row(ctx, backlog[0]).hold_reason == "at_utilization_limit"


def test_waiting_sessions_are_counted_up_to_a_bound(engine, clock) -> None:
    ctx, *_ = build(engine, clock)
    for i in range(3):
        new(ctx, prompt=f"w {i}")
    with session_scope(engine) as db:
        assert waiting_by_runtime(db) == {"echo": 3}
    with session_scope(engine) as db:
        for i in range(WAITING_COUNTED):
            new(ctx, prompt=f"more {i}")
        assert waiting_by_runtime(db) is None  # past the bound: not counted to the end, not bounded


def test_the_history_is_read_once_an_hour(engine, clock) -> None:
    ctx, deferrer, _quota = scene(engine, clock)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    spends = lambda runtime: True  # noqa: E731
    with session_scope(engine) as db:
        first = learned(db, clock.now(), spends)
    reads = len(statements)
    assert first is not None and first.arrivals_per_hour is not None and len(first.arrivals_per_hour) == HOURS_OF_WEEK
    assert first.turn_minutes == {"echo": pytest.approx(20.0)}
    clock.advance(timedelta(minutes=59 - clock.now().minute))
    with session_scope(engine) as db:
        assert learned(db, clock.now(), spends) is first
    assert len(statements) == reads  # kept: no history read
    clock.advance(timedelta(minutes=1))
    with session_scope(engine) as db:
        assert learned(db, clock.now(), spends) is not first
