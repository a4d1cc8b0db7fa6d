"""Seed 000, "Agent queued for a runner slot": the weighted load is the slot budget. The gate's
slot check (`rules/gate.py: evaluate`, through `rules/slots.py`) is a table here, one row per
rule, and then the same case on the production wiring: two w0.5 sessions running in 2 slots
leave room for another w0.5, a w0, a 2x multiplier and a `capacity 5` session, and every
surface shows the load as "1.0 of 2"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.api import intake
from scheduler.engine.turns import submit_turn
from scheduler.rules.explain import explain
from scheduler.rules.gate import Reason, evaluate
from scheduler.rules.slots import budget_for
from scheduler.rules.snapshot import Asking, FleetTurn, PolicyView, Snapshot, WindowState
from scheduler.steering.gate_card import build_card, render_card
from scheduler.store.db import session_scope
from scheduler.store.sessions import NewSession
from tests.support.harness import build, new, row

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def snapshot(*weights: float, slots: int = 2, priority: tuple[float, ...] = ()) -> Snapshot:
    policy = PolicyView(
        gating_enabled=True,
        reserve_5h_pct=20.0,
        reserve_7d_pct=20.0,
        max_sessions=slots,
        preemption_enabled=True,
        overrides={},
    )
    windows = (
        WindowState("5h", timedelta(hours=5), NOW + timedelta(hours=2), 5000.0, 10.0, True),
        WindowState("7d", timedelta(days=7), NOW + timedelta(days=3), 50000.0, 100.0, True),
    )
    fleet = [FleetTurn(i, True, True, 0.001, w) for i, w in enumerate(weights, start=1)]
    fleet += [FleetTurn(100 + i, False, True, 0.001, w) for i, w in enumerate(priority)]
    return Snapshot(policy, windows, tuple(fleet), agent_workers=12)


def asking(
    weight: float = 1.0,
    *,
    capacity: int | None = None,
    multiplier: float | None = None,
    spot: bool = True,
    running: bool = False,
) -> Asking:
    return Asking(99, spot, running, True, 0.001, weight, capacity, multiplier)


ROWS = [
    # (rule, fleet weights, asking, allowed)
    ("w0.5 fits at load 1.0 of 2", (0.5, 0.5), asking(0.5), True),
    ("w0 fits at load 1.0 of 2", (0.5, 0.5), asking(0.0), True),
    ("w1.0 fits exactly at load 1.0 of 2", (0.5, 0.5), asking(1.0), True),
    ("w1.5 does not fit at load 1.0 of 2", (0.5, 0.5), asking(1.5), False),
    ("a 2x multiplier makes the budget 4", (0.5, 0.5), asking(2.0, multiplier=2.0), True),
    ("an authored capacity replaces the budget: 5", (0.5, 0.5), asking(3.0, capacity=5), True),
    ("an authored capacity binds below the slots too", (0.5, 0.5), asking(1.0, capacity=1), False),
    ("a full fleet holds a default claim", (1.0, 1.0), asking(1.0), False),
    ("a full fleet holds a zero weight", (1.0, 1.0), asking(0.0), False),
    ("an over-committed fleet holds a zero weight", (1.0, 1.5), asking(0.0), False),
    ("capacity 5 fits beside a full fleet of 2", (1.0, 1.0), asking(1.0, capacity=5), True),
    ("priority work counts toward the load", (), asking(1.0), False),
    ("priority is never held", (1.0, 1.0), asking(1.0, spot=False), True),
    ("a running session is counted in the fleet itself", (1.0, 1.0), asking(1.0, running=True), True),
    ("with every weight 1.0 it is seed 001's count", (1.0,), asking(1.0), True),
]


@pytest.mark.parametrize(("rule", "weights", "who", "allowed"), ROWS, ids=[r[0] for r in ROWS])
def test_the_slot_check_is_the_weighted_budget(rule, weights, who, allowed) -> None:
    priority = (1.0, 1.0) if rule == "priority work counts toward the load" else ()
    decision = evaluate(snapshot(*weights, priority=priority), who, NOW)
    assert decision.allowed is allowed, (rule, decision)
    if not allowed:
        assert decision.reason is Reason.FLEET_AT_CAP


@pytest.mark.parametrize(
    ("slots", "capacity", "multiplier", "budget"),
    [(2, None, None, 2.0), (2, 5, None, 5.0), (2, None, 2.0, 4.0), (5, None, 1.5, 7.5), (10, 1, None, 1.0)],
)
def test_a_session_s_budget(slots, capacity, multiplier, budget) -> None:
    assert budget_for(slots, capacity, multiplier) == budget


def test_the_held_sentence_shows_the_load() -> None:
    why = explain(evaluate(snapshot(0.5, 0.5), asking(1.5), NOW), NOW).why
    assert "its claim of 1.5 does not fit beside the running turns (1.0 of 2 in use, 2 running)" in why
    why = explain(evaluate(snapshot(0.5, 0.5), asking(0.5), NOW), NOW).why
    assert "with the slots at 1.0 of 2 in use" in why


def spot(ctx, **claim: object) -> int:
    return new(ctx, genesis="schedule", **claim)


def test_weighted_sessions_fill_the_budget_on_the_production_wiring(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=2, turn_minutes=60, wired=True)
    for _ in range(2):
        assert submit_turn(ctx, spot(ctx, weight=0.5), "half").outcome == "started"
    with session_scope(ctx.engine) as db:
        card = render_card(build_card(db, ctx, None, ctx.clock.now()))
    assert "slots 1.0 of 2 in use (0 priority, 2 spot running)" in card
    for claim in ({"weight": 0.5}, {"weight": 0.0}):
        sid = spot(ctx, **claim)
        sub = submit_turn(ctx, sid, "fits")
        assert sub.outcome == "started", (claim, sub.sentence)
    # 1.5 of 2 now: a default claim waits, an authored budget above the slots fits.
    held = spot(ctx)
    sub = submit_turn(ctx, held, "waits")
    assert (
        sub.reason == "fleet_at_cap"
        and "its claim of 1.0 does not fit beside the running turns (1.5 of 2 in use" in sub.sentence
    )
    assert submit_turn(ctx, spot(ctx, capacity=5), "own budget").outcome == "started"
    assert submit_turn(ctx, spot(ctx, weight=1.0, capacity_multiplier=2.0), "twice").outcome == "started"
    assert row(ctx, held).status == "waiting"


def test_the_api_reads_the_load(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=2, turn_minutes=60, wired=True)
    for _ in range(2):
        intake.api_session(ctx, NewSession(genesis="schedule", weight=0.5), "half")
    with session_scope(ctx.engine) as db:
        fleet = build_card(db, ctx, None, ctx.clock.now()).as_dict()["fleet"]
    assert fleet["load"] == 1.0 and fleet["slots"] == 2  # type: ignore[index]
