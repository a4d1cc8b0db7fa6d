"""A per-session cost cap (P15 item 1): the turn asked for after the session's spend reached its
cap is not started but held, saying what was spent, the cap and how to raise it; a running turn
whose burn estimate reaches the cap is halted by the ceiling sweep and held the same way; raising
or clearing the cap starts it again. Bad caps are refused and change nothing."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from scheduler.engine.lifecycle import archive
from scheduler.engine.start_now import start_now
from scheduler.engine.turns import submit_turn
from scheduler.errors import InvalidInput, Refused
from scheduler.holds.cost_caps import set_cap
from scheduler.store.db import session_scope
from scheduler.store.models import Turn
from scheduler.store.turn_reads import spent_by
from scheduler.wiring import run_periodic
from tests.support.harness import build, new, row
from tests.support.holdkit import Heard

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

HELD = ("Held: session #{sid} has spent $2.00, reaching its $2.00 cost cap, so its next turn is not started. "
        "Raise it with `/pacer cap {sid} <usd>` (or `none` to clear it), or PATCH cost_cap_usd on the API, to resume.")


def _spent_two_dollars(engine, clock, cap):
    """A session capped at `cap` whose first turn (20 minutes at $0.10 a minute) cost $2.00."""
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=3, turn_minutes=20, burn=0.1, wired=True)
    heard = Heard(ctx)
    sid = new(ctx, title="capped")
    assert submit_turn(ctx, sid, "go").outcome == "started"
    deferrer.advance(timedelta(minutes=20))
    assert row(ctx, sid).status == "done"
    set_cap(ctx, sid, cap, actor="U_OPS")  # a done session may be replied to: its cap may change
    with session_scope(engine) as db:
        assert spent_by(db, sid) == pytest.approx(2.0)
    return ctx, deferrer, workers, heard, sid


def test_a_turn_after_the_spend_reached_the_cap_is_held_with_spend_cap_and_how_to_raise(any_engine, clock) -> None:
    ctx, deferrer, _workers, _heard, sid = _spent_two_dollars(any_engine, clock, 2.0)
    sub = submit_turn(ctx, sid, "more", kind="follow_up")
    assert (sub.outcome, sub.reason, sub.sentence) == ("held", "cost_cap", HELD.format(sid=sid))
    assert start_now(ctx, sid).submission.outcome == "held"  # the cap is the person's own limit
    deferrer.advance(timedelta(hours=2))  # its re-checks keep it held
    assert (row(ctx, sid).status, row(ctx, sid).hold_reason) == ("waiting", "cost_cap")

    assert set_cap(ctx, sid, 5.0, actor="U_OPS") == {"cost_cap_usd": [2.0, 5.0]}
    deferrer.advance(timedelta(0))  # the queue pass the raise asked for
    assert row(ctx, sid).status == "running"


def test_clearing_the_cap_starts_the_held_turn_and_an_unreached_cap_holds_nothing(any_engine, clock) -> None:
    ctx, deferrer, _workers, _heard, sid = _spent_two_dollars(any_engine, clock, 2.0)
    assert submit_turn(ctx, sid, "more", kind="follow_up").reason == "cost_cap"
    set_cap(ctx, sid, None, actor="U_OPS")
    deferrer.advance(timedelta(0))
    assert row(ctx, sid).status == "running"
    other = new(ctx, cost_cap_usd=2.01)
    assert submit_turn(ctx, other, "go").outcome == "started"


def test_a_running_turn_is_halted_by_its_alarm_when_the_estimate_reaches_the_cap(any_engine, clock) -> None:
    ctx, deferrer, _workers, heard, sid = _spent_two_dollars(any_engine, clock, 3.0)
    assert submit_turn(ctx, sid, "more", kind="follow_up").outcome == "started"
    deferrer.advance(timedelta(minutes=9, seconds=59))  # $2.00 spent + 9m59s at $0.10 a minute
    assert row(ctx, sid).status == "running"
    deferrer.advance(timedelta(seconds=1))  # $3.00: the cap
    session = row(ctx, sid)
    assert (session.status, session.hold_reason) == ("waiting", "cost_cap")
    assert session.hold_sentence.startswith(
        f"Halted: session #{sid} reached its $3.00 cost cap while running (about $3.00 spent"
    )
    assert [n["reason"] for n in heard.of("paused")] == ["cost_cap"]


def test_a_cap_raised_mid_turn_moves_its_alarm_and_one_lowered_halts_at_once(any_engine, clock) -> None:
    ctx, deferrer, _workers, _heard, sid = _spent_two_dollars(any_engine, clock, 3.0)
    submit_turn(ctx, sid, "more", kind="follow_up")
    deferrer.advance(timedelta(minutes=5))
    set_cap(ctx, sid, 4.0, actor="U_OPS")
    deferrer.advance(timedelta(minutes=14))  # $2.00 + 19 minutes: under $4.00
    assert row(ctx, sid).status == "running"
    set_cap(ctx, sid, 3.5, actor="U_OPS")
    deferrer.advance(timedelta(0))
    assert row(ctx, sid).hold_reason == "cost_cap"


def test_the_ceiling_sweep_halts_a_capped_turn_whose_alarm_was_lost(any_engine, clock) -> None:
    ctx, deferrer, workers, heard, sid = _spent_two_dollars(any_engine, clock, 3.0)
    assert submit_turn(ctx, sid, "more", kind="follow_up").outcome == "started"
    deferrer.cancel(f"cost-cap:{sid}")
    deferrer.advance(timedelta(minutes=5))
    report = run_periodic(ctx, "ceiling_sweep")  # $2.00 + 5 min at $0.10: under the cap
    assert report.capped == [] and row(ctx, sid).status == "running"
    deferrer.advance(timedelta(minutes=6))
    report = run_periodic(ctx, "ceiling_sweep")  # $2.00 + 11 min: past the cap
    assert report.capped == [sid]
    deferrer.advance(timedelta(0))
    session = row(ctx, sid)
    assert (session.status, session.hold_reason, session.hold_turn_kind) == ("waiting", "cost_cap", "resume")
    assert session.hold_sentence.startswith(
        f"Halted: session #{sid} reached its $3.00 cost cap while running (about $3.10 spent"
    )
    with session_scope(any_engine) as db:
        turns = db.query(Turn).filter(Turn.session_id == sid).order_by(Turn.id).all()
        assert [t.status for t in turns] == ["done", "halted"]
    assert [n["reason"] for n in heard.of("paused")] == ["cost_cap"]
    set_cap(ctx, sid, 10.0, actor="U_OPS")
    deferrer.advance(timedelta(0))
    assert row(ctx, sid).status == "running"


@pytest.mark.parametrize("cap", [-5.0, 0.0, math.nan, math.inf, 2_000_000.0])
def test_a_bad_cap_is_refused_and_changes_nothing(engine, clock, cap) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, wired=True)
    sid = new(ctx, cost_cap_usd=4.0)
    with pytest.raises(
        InvalidInput,
        match=r"cost_cap_usd: a cost cap must be a finite number of dollars above 0, at most \$1,000,000.00",
    ):
        set_cap(ctx, sid, cap, actor="U_OPS")
    with pytest.raises(InvalidInput, match="cost_cap_usd: a cost cap must be"):
        new(ctx, cost_cap_usd=cap)
    assert row(ctx, sid).cost_cap_usd == 4.0


def test_an_archived_session_cap_cannot_change(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, turn_minutes=1, wired=True)
    sid = new(ctx)
    archive(ctx, sid, actor="U_OPS")
    with pytest.raises(Refused, match=f"session #{sid} is archived; its cost cap cannot change"):
        set_cap(ctx, sid, 3.0, actor="U_OPS")
