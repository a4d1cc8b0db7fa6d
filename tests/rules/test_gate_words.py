"""The gate's two sentences in the words of the windows that hold (issue P21, item 3): each
window at its own reset, and a budget with room left held on what was projected, not "spent"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduler.rules.explain import explain
from scheduler.rules.gate import Ceiling, evaluate
from scheduler.rules.snapshot import Asking, FleetTurn, PolicyView, Snapshot, WindowState

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def _window(name: str, *, spent: float, capacity: float, hours_left: float) -> WindowState:
    period = timedelta(hours=5) if name == "5h" else timedelta(days=7)
    return WindowState(name, period, NOW + timedelta(hours=hours_left), capacity, spent, True)


def _asking(burn: float = 0.05) -> Asking:
    return Asking(99, is_spot=True, already_running=False, spends_quota=True, burn_per_min=burn)


def _snapshot(windows: tuple[WindowState, ...], fleet: tuple[FleetTurn, ...]) -> Snapshot:
    policy = PolicyView(gating_enabled=True, reserve_5h_pct=20.0, reserve_7d_pct=20.0, max_sessions=10,
                        preemption_enabled=True, overrides={})
    return Snapshot(policy, windows, fleet, 12)


def test_a_pace_hold_on_both_windows_names_each_windows_own_reset() -> None:
    """It said "the 5-hour and weekly rollover at <the weekly reset>" while the 5-hour window
    reset eight hours earlier."""
    windows = (
        _window("5h", spent=30.0, capacity=50.0, hours_left=2),
        _window("7d", spent=400.0, capacity=600.0, hours_left=10),
    )
    d = evaluate(_snapshot(windows, (FleetTurn(1, True, True, 0.2),)), _asking(), NOW)
    assert d.ceiling is Ceiling.PACING_CURVE and set(d.paced_windows) == {"5h", "7d"}, d
    until = explain(d, NOW).until
    assert (
        "At the latest, the 5-hour rollover at 2026-11-02 11:00 UTC and the weekly rollover at 2026-11-02 19:00 UTC"
        " reset each window's curve" in until
    ), until
    assert "5-hour and weekly rollover" not in until


def test_a_budget_with_room_left_is_held_on_what_was_projected_not_called_spent() -> None:
    """$0.13 spent of a $40 spot budget, and the fleet's next ten minutes projected past what is left."""
    windows = (
        _window("5h", spent=0.13, capacity=50.0, hours_left=3),
        _window("7d", spent=0.0, capacity=6000.0, hours_left=80),
    )
    burning = tuple(FleetTurn(i, False, True, 2.0) for i in range(2))
    d = evaluate(_snapshot(windows, burning), _asking(), NOW)
    assert d.ceiling is Ceiling.SPOT_BUDGET, d
    text = explain(d, NOW)
    assert "no non-reserved budget left" not in text.why, text.why
    assert (
        "what the fleet would spend does not fit in what is left of the 5-hour window's non-reserved budget — "
        "5-hour: $0.13 spent of a $40.00 spot budget, $39.87 left, and $40.50 projected over the next 10 minutes"
    ) in text.why, text.why
    assert "At the latest, the 5-hour rollover at 2026-11-02 12:00 UTC refills it" in text.until, text.until
