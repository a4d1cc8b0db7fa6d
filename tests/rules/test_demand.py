"""The demand-aware pace (issue 32, P20 item 1) as a pure rule: a table of committed spend, waiting
demand, expected arrivals and budget left -> holds or not; the history it learns arrivals from;
and the gate, which lets a window ahead of its curve through only when its demand fits, never
past its cap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.rules.demand import (
    DEMAND_MARGIN_PCT,
    HOURS_OF_WEEK,
    ArrivalHistory,
    Deferred,
    Demand,
    RunningTurn,
    WaitingGroup,
    arrival_profile,
    check,
    expected_arrivals,
    hour_of_week,
    pace_holds,
)
from scheduler.rules.gate import Ceiling, Reason, evaluate
from scheduler.rules.snapshot import Asking, FleetTurn, PolicyView, Snapshot, WindowState

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)  # a Monday

# committed, waiting, arrivals, budget left -> holds (the margin is DEMAND_MARGIN_PCT = 50%)
TABLE = [
    ("nothing asked of a roomy window", 0.0, 0.0, 0.0, 100.0, False),
    ("the calm example's 5-hour window: $85 asked of $240", 20.0, 15.0, 50.0, 240.0, False),
    ("fits exactly one and a half times over", 20.0, 20.0, 20.0, 90.0, False),
    ("a cent more than fits with the margin", 20.0, 20.0, 20.01, 90.0, True),
    ("fits without the margin, not with it", 30.0, 30.0, 20.0, 100.0, True),
    ("a backlog alone outgrows the window", 0.0, 1500.0, 0.0, 240.0, True),
    ("expected arrivals alone outgrow it", 0.0, 0.0, 390.0, 240.0, True),
    ("the running turns already spend it", 250.0, 0.0, 0.0, 240.0, True),
    ("no budget left", 0.0, 0.0, 0.0, -5.0, True),
    ("more sessions wait than were counted", 0.0, None, 0.0, 1000.0, True),
    ("no history to learn arrivals from", 0.0, 0.0, None, 1000.0, True),
]


@pytest.mark.parametrize(("committed", "waiting", "arrivals", "left", "holds"), [row[1:] for row in TABLE],
                         ids=[row[0] for row in TABLE])
def test_the_pace_holds_only_when_the_demand_does_not_fit(
    committed: float, waiting: float | None, arrivals: float | None, left: float, holds: bool
) -> None:
    assert DEMAND_MARGIN_PCT == 50.0
    assert pace_holds(committed, waiting, arrivals, left) is holds


def test_the_window_prices_each_part_up_to_its_rollover() -> None:
    demand = Demand(
        running=(RunningTurn(0.25, NOW - timedelta(minutes=10), 30.0),  # 20 minutes more
                 RunningTurn(0.25, NOW - timedelta(minutes=50), 30.0)),  # past its length: ten minutes more
        waiting=(WaitingGroup(4, 0.25, 30.0), WaitingGroup(2, 0.0, 30.0)),
        arrivals_per_hour=(6.0,) * HOURS_OF_WEEK,
    )
    c = check(demand, 200.0, NOW, NOW + timedelta(hours=2))
    assert (c.committed, c.waiting, c.arrivals, c.total) == (7.5, 30.0, 12.0, 49.5)
    assert not c.holds and c.room == 200.0
    # Fifteen minutes before the rollover nothing is priced past it.
    late = check(demand, 200.0, NOW, NOW + timedelta(minutes=15))
    assert (late.committed, late.waiting, late.arrivals) == (0.25 * 15 + 0.25 * 10, 4 * 0.25 * 15, 1.5)
    unbounded = check(Demand(waiting_overflow=True, arrivals_per_hour=(0.0,) * HOURS_OF_WEEK), 1e6, NOW, NOW)
    assert unbounded.waiting is None and unbounded.total is None and unbounded.holds


def test_arrivals_are_learned_per_genesis_and_hour_of_week() -> None:
    assert hour_of_week(NOW) == 9 and hour_of_week(NOW + timedelta(days=6, hours=14)) == 167
    # Two weeks of history: github_label sessions at 09:00 on Mondays only, two each week.
    since = NOW - timedelta(weeks=2)
    history = ArrivalHistory(since, NOW, {("github_label", 9): 4}, {"github_label": 5.0})
    profile = arrival_profile(history)
    assert profile is not None and len(profile) == HOURS_OF_WEEK
    mean = 4 / (14 * 24)  # sessions an hour, over the whole history
    assert profile[9] == pytest.approx((4 + 2 * mean) / (2 + 2) * 5.0)  # Monday 09:00: seen twice, four sessions
    assert profile[10] == pytest.approx(2 * mean / 4 * 5.0)  # seen twice, none: leans only on the mean
    # The next Monday 09:00–10:00, and half of the hour after it.
    assert expected_arrivals(profile, NOW, NOW + timedelta(hours=1, minutes=30)) == pytest.approx(
        profile[9] + profile[10] / 2
    )


def test_a_history_shorter_than_a_week_leans_on_the_mean_rate() -> None:
    counts = {("schedule", 0): 0, ("schedule", 5): 5}
    history = ArrivalHistory(NOW - timedelta(hours=10), NOW, counts, {"schedule": 2.0})
    profile = arrival_profile(history)
    assert profile is not None
    assert profile[100] == pytest.approx(5 / 10 * 2.0)  # an hour of week never seen: the mean rate


@pytest.mark.parametrize(
    "history",
    [
        None,
        ArrivalHistory(NOW - timedelta(minutes=30), NOW, {("api", 8): 3}, {"api": 1.0}),  # under an hour
        ArrivalHistory(NOW - timedelta(hours=3), NOW, {("api", 8): 3}, {}),  # nothing priced yet
    ],
    ids=["no history", "under an hour", "no session priced"],
)
def test_too_little_history_says_nothing(history: ArrivalHistory | None) -> None:
    assert arrival_profile(history) is None


def test_deferred_reads_once_and_only_when_asked() -> None:
    reads: list[int] = []
    value = Deferred(lambda: reads.append(1) or Demand())
    assert reads == []
    assert value.get() == Demand() and value.get() == Demand() and reads == [1]


# --------------------------------------------------------------------------- through the gate


def _policy(demand_pacing: bool = True) -> PolicyView:
    return PolicyView(True, 20.0, 20.0, 10, True, {}, demand_pacing=demand_pacing)


def _snapshot(
    demand: Demand | Deferred[Demand] | None, *, spent: float = 100.0, demand_pacing: bool = True
) -> Snapshot:
    # 5-hour window: $300, $240 spot budget; 100 spent, 2.5 h left: sustainable $0.93/min.
    five = WindowState("5h", timedelta(hours=5), NOW + timedelta(hours=2.5), 300.0, spent, True)
    week = WindowState("7d", timedelta(days=7), NOW + timedelta(days=3), 12000.0, 500.0, True)
    fleet = tuple(FleetTurn(i, True, True, 0.25) for i in range(1, 4))  # $0.75/min of spot work in flight
    return Snapshot(_policy(demand_pacing), (five, week), fleet, 12, demand=demand)


ASKING = Asking(99, True, False, True, 0.25)
CALM = Demand((RunningTurn(0.25, NOW, 30.0),) * 3, (WaitingGroup(1, 0.25, 30.0),), False, (4.0,) * HOURS_OF_WEEK)
BUSY = Demand((RunningTurn(0.25, NOW, 30.0),) * 3, (WaitingGroup(40, 0.25, 30.0),), False, (4.0,) * HOURS_OF_WEEK)


def test_ahead_of_the_curve_with_a_demand_that_fits_starts() -> None:
    d = evaluate(_snapshot(CALM), ASKING, NOW)
    assert d.allowed and d.reason is Reason.WITHIN_LIMITS and d.pace_mode == "demand"
    five = d.figures("5h")
    assert five is not None and not five.pace_passed and five.released_by_demand
    assert five.demand is not None and five.demand.total == pytest.approx(22.5 + 7.5 + 10.0)


@pytest.mark.parametrize(
    ("demand", "switch"),
    [(BUSY, True), (None, True), (CALM, False)],
    ids=["the demand does not fit", "the demand is not known", "demand-aware pacing is off"],
)
def test_otherwise_the_curve_holds_as_before(demand: Demand | None, switch: bool) -> None:
    d = evaluate(_snapshot(demand, demand_pacing=switch), ASKING, NOW)
    assert d.held and d.ceiling is Ceiling.PACING_CURVE and d.paced_windows == ("5h",) and d.pace_mode == "curve"
    assert d.demand_pacing is switch


def test_the_cap_never_relaxes_however_little_is_asked() -> None:
    d = evaluate(_snapshot(Demand(arrivals_per_hour=(0.0,) * HOURS_OF_WEEK), spent=239.0), ASKING, NOW)
    assert d.held and d.ceiling is Ceiling.SPOT_BUDGET and d.budget_spent_windows == ("5h",)


def test_the_demand_is_read_only_when_a_window_is_ahead_of_its_curve() -> None:
    reads: list[int] = []
    deferred = Deferred(lambda: reads.append(1) or CALM)
    behind = _snapshot(deferred, spent=10.0)  # $230 left over 2.5 h: $1.53/min, the fleet is inside it
    assert evaluate(behind, ASKING, NOW).allowed and reads == []
    assert evaluate(_snapshot(deferred), ASKING, NOW).allowed and reads == [1]
