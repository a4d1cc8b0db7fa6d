"""Seed 001, "What a pause does": the banner says what ran out. The cap is predictive (it projects
the fleet's burn from the reading), so a pause with budget left must say what it projected, not
that the budget is spent: "$2.50 spent of $40" and "no non-reserved budget left" contradict."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduler.context import Runtime
from scheduler.rules.explain import explain
from scheduler.rules.gate import Ceiling, evaluate
from scheduler.rules.snapshot import Asking, FleetTurn, PolicyView, Snapshot, WindowState
from tests.support.sweeping import Scene

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def snapshot(spent: float, *burns: float) -> Snapshot:
    policy = PolicyView(
        gating_enabled=True,
        reserve_5h_pct=20.0,
        reserve_7d_pct=20.0,
        max_sessions=10,
        preemption_enabled=True,
        overrides={},
    )
    windows = (
        WindowState("5h", timedelta(hours=5), NOW + timedelta(hours=3), 50.0, spent, True),
        WindowState("7d", timedelta(days=7), NOW + timedelta(days=3), 50000.0, 100.0, True),
    )
    return Snapshot(policy, windows, tuple(FleetTurn(i, True, True, b) for i, b in enumerate(burns, start=1)))


def test_a_projected_overrun_names_the_projection() -> None:
    decision = evaluate(snapshot(2.5, 2.0), Asking(99, True, False, True, 2.0), NOW)
    assert decision.ceiling is Ceiling.SPOT_BUDGET
    why = explain(decision, NOW).why
    assert "no non-reserved budget left" not in why
    assert (
        "5-hour: $2.50 spent of a $40.00 spot budget, $37.50 left, and $40.00 projected over the next 10 minutes at "
        "$4.00/min"
        in why
    ), why


def test_a_spent_budget_still_says_it_is_spent() -> None:
    why = explain(evaluate(snapshot(41.0), Asking(99, True, False, True, 0.1), NOW), NOW).why
    assert (
        "the 5-hour window has no non-reserved budget left for it — 5-hour: $41.00 spent of a $40.00 spot budget" in why
    )


def test_the_ceiling_sweep_s_banner_says_what_it_projected(engine, clock) -> None:
    scene = Scene(engine, clock, max_sessions=4, turn_minutes=120)
    a = scene.start()
    b = scene.start()
    scene.quota.capacity_5h, scene.quota.spent_5h = 50.0, 2.5  # a $40 spot budget, $2.50 of it spent
    scene.ctx.limits.runtimes["echo"] = Runtime("echo", True, 2.0)  # the fleet burns $4/min: $40 in ten minutes
    report = scene.sweep()
    assert sorted(report.paused) == sorted([a, b])
    detail = scene.row(a).pause_detail
    assert "no non-reserved budget left" not in detail, detail
    assert (
        "$2.50 spent of a $40.00 spot budget, $37.50 left, and $40.00 projected over the next 10 minutes" in detail
    ), detail
