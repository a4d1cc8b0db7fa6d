"""The gate, one row per rule of seed 001 ("The gate" … "Held until is a condition"), the seed's
incidents as named tests, and hypothesis properties."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.rules.explain import explain
from scheduler.rules.gate import (
    PROJECTION_MINUTES,
    Ceiling,
    Reason,
    decide,
    evaluate,
    live_window,
    pace_unneeded,
    projection_minutes,
    unrecorded_minutes,
)
from scheduler.rules.snapshot import Asking, FleetTurn, PolicyView, Snapshot, WindowState

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def policy(**kw) -> PolicyView:
    base = dict(
        gating_enabled=True,
        reserve_5h_pct=20.0,
        reserve_7d_pct=20.0,
        max_sessions=10,
        preemption_enabled=True,
        overrides={},
    )
    return PolicyView(**{**base, **kw})


def window(name="5h", spent=10.0, capacity=50.0, hours_left=2.5, calibrated=True) -> WindowState:
    period = timedelta(hours=5) if name == "5h" else timedelta(days=7)
    return WindowState(name, period, NOW + timedelta(hours=hours_left), capacity, spent, calibrated)


def roomy_week() -> WindowState:
    return window("7d", spent=100.0, capacity=6000.0, hours_left=84)


def snap(*, w5=None, w7=None, fleet=(), workers=12, **pol) -> Snapshot:
    return Snapshot(policy(**pol), (w5 or window(), w7 or roomy_week()), tuple(fleet), workers)


def spot_turn(i, burn=0.05, spends=True):
    return FleetTurn(i, True, spends, burn)


def prio_turn(i, burn=0.05):
    return FleetTurn(i, False, True, burn)


def asking(spot=True, running=False, burn=0.05, spends=True, sid=99) -> Asking:
    return Asking(sid, spot, running, spends, burn)


CASES = [
    # (rule, snapshot, asking, reason, ceiling)
    (
        "priority is never held, even with the budget gone and every slot taken",
        snap(w5=window(spent=60.0), fleet=[spot_turn(i) for i in range(10)]),
        asking(spot=False),
        Reason.PRIORITY,
        None,
    ),
    (
        "gating off lets spot work through",
        snap(w5=window(spent=60.0), gating_enabled=False),
        asking(),
        Reason.GATING_DISABLED,
        None,
    ),
    ("no quota reading falls open", Snapshot(policy(), None), asking(), Reason.NO_SNAPSHOT, None),
    (
        "a runtime that spends no quota is not gated",
        snap(w5=window(spent=60.0)),
        asking(spends=False),
        Reason.NO_QUOTA,
        None,
    ),
    (
        "room, on the curve, a free slot: within limits",
        snap(fleet=[spot_turn(1)]),
        asking(),
        Reason.WITHIN_LIMITS,
        None,
    ),
    (
        "the cap: spent plus ten minutes of projected burn crosses the non-reserved budget",
        snap(w5=window(spent=39.0), fleet=[spot_turn(1, burn=0.1)]),
        asking(burn=0.1),
        Reason.AT_UTILIZATION_LIMIT,
        Ceiling.SPOT_BUDGET,
    ),
    (
        "the cap is absolute: the idle-fleet waiver does not lift it",
        snap(w5=window(spent=40.5)),
        asking(),
        Reason.AT_UTILIZATION_LIMIT,
        Ceiling.SPOT_BUDGET,
    ),
    (
        "the cap reads the weekly window too",
        snap(w7=window("7d", spent=4800.0, capacity=6000.0, hours_left=10)),
        asking(),
        Reason.AT_UTILIZATION_LIMIT,
        Ceiling.SPOT_BUDGET,
    ),
    (
        "the pace: fleet burn including this session above spot left / time left",
        snap(w5=window(spent=30.0, hours_left=2), fleet=[spot_turn(1, burn=0.08)]),
        asking(burn=0.02),
        Reason.AT_UTILIZATION_LIMIT,
        Ceiling.PACING_CURVE,
    ),
    (
        "the pace is <=: exactly on the curve is admitted",
        snap(w5=window(spent=28.0, hours_left=2), fleet=[spot_turn(1, burn=0.05)]),
        asking(burn=0.05),
        Reason.WITHIN_LIMITS,
        None,
    ),
    (
        "no spot work in flight: the pace is waived, only the cap applies",
        snap(w5=window(spent=30.0, hours_left=2)),
        asking(burn=0.5),
        Reason.WITHIN_LIMITS,
        None,
    ),
    (
        "priority work in flight does not switch the waiver off",
        snap(w5=window(spent=30.0, hours_left=2), fleet=[prio_turn(1, burn=0.05)]),
        asking(burn=0.3),
        Reason.WITHIN_LIMITS,
        None,
    ),
    (
        "the asking session does not count as spot work in flight",
        snap(w5=window(spent=30.0, hours_left=2), fleet=[spot_turn(99, burn=0.3)]),
        asking(running=True, burn=0.3),
        Reason.WITHIN_LIMITS,
        None,
    ),
    (
        "priority burn still counts against the cap",
        snap(w5=window(spent=36.0), fleet=[prio_turn(1, burn=0.5)]),
        asking(burn=0.01),
        Reason.AT_UTILIZATION_LIMIT,
        Ceiling.SPOT_BUDGET,
    ),
    (
        "every slot taken: fleet_at_cap",
        snap(
            w5=window(spent=0.0, capacity=5000),
            w7=window("7d", spent=0.0, capacity=50000),
            fleet=[spot_turn(i, 0.001) for i in range(10)],
        ),
        asking(burn=0.001),
        Reason.FLEET_AT_CAP,
        Ceiling.FLEET_CAP,
    ),
    (
        "priority sessions take slots too: ten priority turns leave no spot slot",
        snap(
            w5=window(spent=0.0, capacity=5000),
            w7=window("7d", spent=0.0, capacity=50000),
            fleet=[prio_turn(i, 0.001) for i in range(10)],
        ),
        asking(burn=0.001),
        Reason.FLEET_AT_CAP,
        Ceiling.FLEET_CAP,
    ),
    (
        "an already-running session is exempt from fleet_at_cap only",
        snap(
            w5=window(spent=0.0, capacity=5000),
            w7=window("7d", spent=0.0, capacity=50000),
            fleet=[spot_turn(i, 0.001) for i in range(9)] + [spot_turn(99, 0.001)],
        ),
        asking(running=True, burn=0.001),
        Reason.WITHIN_LIMITS,
        None,
    ),
    (
        "runtimes that spend no quota take no slot",
        snap(
            w5=window(spent=0.0, capacity=5000),
            w7=window("7d", spent=0.0, capacity=50000),
            fleet=[spot_turn(i, 0.0, spends=False) for i in range(10)],
        ),
        asking(burn=0.001),
        Reason.WITHIN_LIMITS,
        None,
    ),
    (
        "the slot ceiling is min(max sessions, workers)",
        snap(
            w5=window(spent=0.0, capacity=5000),
            w7=window("7d", spent=0.0, capacity=50000),
            fleet=[prio_turn(i, 0.001) for i in range(4)],
            workers=4,
        ),
        asking(burn=0.001),
        Reason.FLEET_AT_CAP,
        Ceiling.FLEET_CAP,
    ),
    (
        "a spent budget outranks the pace as the ceiling (the stricter one)",
        snap(
            w5=window(spent=40.0, hours_left=1),
            w7=window("7d", spent=4000.0, capacity=6000.0, hours_left=1),
            fleet=[spot_turn(1, burn=1.0)],
        ),
        asking(),
        Reason.AT_UTILIZATION_LIMIT,
        Ceiling.SPOT_BUDGET,
    ),
    (
        "the cap counts spend inside the window: ten minutes of burn would cross, the burn to a rollover four minutes "
        "out does not",
        snap(w5=window(spent=38.0, hours_left=4 / 60), fleet=[spot_turn(1, burn=0.2)]),
        asking(burn=0.2),
        Reason.WITHIN_LIMITS,
        None,
    ),
    (
        "inside its last ten minutes the window's burn to the rollover is still capped",
        snap(w5=window(spent=39.0, hours_left=4 / 60), fleet=[spot_turn(1, burn=0.2)]),
        asking(burn=0.2),
        Reason.AT_UTILIZATION_LIMIT,
        Ceiling.SPOT_BUDGET,
    ),
    (
        "a reading whose reset has passed is last window's: its spend holds nothing in the window now open",
        snap(w5=window(spent=45.0, hours_left=-1 / 60), fleet=[spot_turn(1)]),
        asking(),
        Reason.WITHIN_LIMITS,
        None,
    ),
    (
        "a weekly pace the 5-hour caps cannot outspend before the weekly rollover is not applied",
        snap(
            w5=window(spent=0.0, capacity=300.0, hours_left=4),
            w7=window("7d", spent=0.0, capacity=12000.0, hours_left=164),
            fleet=[spot_turn(i, burn=0.25) for i in range(3)],
        ),
        asking(burn=0.25),
        Reason.WITHIN_LIMITS,
        None,
    ),
    (
        "the weekly pace holds when the 5-hour caps could spend the week out first",
        snap(
            w5=window(spent=0.0, capacity=300.0, hours_left=4),
            w7=window("7d", spent=0.0, capacity=9000.0, hours_left=164),
            fleet=[spot_turn(i, burn=0.25) for i in range(3)],
        ),
        asking(burn=0.25),
        Reason.AT_UTILIZATION_LIMIT,
        Ceiling.PACING_CURVE,
    ),
    (
        "an unneeded weekly pace still leaves the weekly cap",
        snap(
            w5=window(spent=0.0, capacity=300.0, hours_left=4),
            w7=window("7d", spent=9598.0, capacity=12000.0, hours_left=3),
            fleet=[spot_turn(1, burn=0.25)],
        ),
        asking(burn=0.25),
        Reason.AT_UTILIZATION_LIMIT,
        Ceiling.SPOT_BUDGET,
    ),
    (
        "fraction mode: the cap compares the used fraction with the spot share",
        snap(
            w5=window(spent=0.85, capacity=1.0, calibrated=False),
            w7=window("7d", spent=0.1, capacity=1.0, calibrated=False),
        ),
        asking(),
        Reason.AT_UTILIZATION_LIMIT,
        Ceiling.SPOT_BUDGET,
    ),
    (
        "fraction mode: ahead of the straight line to the spot budget is paced",
        snap(
            w5=window(spent=0.5, capacity=1.0, hours_left=4, calibrated=False),
            w7=window("7d", spent=0.01, capacity=1.0, hours_left=160, calibrated=False),
            fleet=[spot_turn(1)],
        ),
        asking(),
        Reason.AT_UTILIZATION_LIMIT,
        Ceiling.PACING_CURVE,
    ),
]


@pytest.mark.parametrize(("rule", "snapshot", "who", "reason", "ceiling"), CASES, ids=[c[0][:60] for c in CASES])
def test_gate_rules(rule, snapshot, who, reason, ceiling) -> None:
    d = evaluate(snapshot, who, NOW)
    assert (d.reason, d.ceiling) == (reason, ceiling), rule
    assert d.allowed == (ceiling is None)


def test_only_a_spent_budget_stops_running_work() -> None:
    spent = evaluate(snap(w5=window(spent=41.0)), asking(), NOW)
    paced = evaluate(snap(w5=window(spent=30.0, hours_left=2), fleet=[spot_turn(1, burn=0.2)]), asking(), NOW)
    full = evaluate(snap(w5=window(spent=0, capacity=5000), w7=window("7d", spent=0, capacity=50000),
                         fleet=[spot_turn(i, 0.001) for i in range(10)]), asking(burn=0.001), NOW)
    assert spent.stops_running_work and not paced.stops_running_work and not full.stops_running_work


def test_budget_spent_windows_names_only_the_spent_one() -> None:
    d = evaluate(
        snap(
            w5=window(spent=41.0, hours_left=0.5),
            w7=window("7d", spent=4780.0, capacity=6000.0, hours_left=1),
            fleet=[spot_turn(1, burn=1.0)],
        ),
        asking(),
        NOW,
    )
    assert d.ceiling is Ceiling.SPOT_BUDGET and d.budget_spent_windows == ("5h",) and "7d" in d.paced_windows
    text = explain(d, NOW)
    assert "5-hour window has no non-reserved budget" in text.why and "weekly" not in text.until


@pytest.mark.parametrize(
    ("rule", "minutes_left", "horizon"),
    [
        ("ten minutes of burn while the rollover is further", 180.0, PROJECTION_MINUTES),
        ("exactly ten minutes left: the whole projection", 10.0, 10.0),
        ("four minutes left: only those four are this window's", 4.0, 4.0),
        ("at the rollover nothing more is this window's", 0.0, 0.0),
    ],
)
def test_the_cap_projects_to_the_rollover_at_most(rule, minutes_left, horizon) -> None:
    assert projection_minutes(minutes_left) == horizon, rule


def test_the_cap_figures_name_the_projection_inside_the_window() -> None:
    d = evaluate(snap(w5=window(spent=38.0, hours_left=4 / 60), fleet=[spot_turn(1, burn=0.2)]), asking(burn=0.2), NOW)
    w5 = d.figures("5h")
    assert w5 is not None and w5.projected == pytest.approx(0.4 * 4) and w5.within_cap


@pytest.mark.parametrize(
    ("rule", "resets_in", "spent", "next_reset_in"),
    [
        ("a window still open is read as it is", timedelta(minutes=1), 45.0, timedelta(minutes=1)),
        ("a reset exactly now has happened", timedelta(0), 0.0, timedelta(hours=5)),
        ("a reading from a minute before the rollover", -timedelta(minutes=1), 0.0, timedelta(hours=4, minutes=59)),
        ("several periods late: the window now open", -timedelta(hours=11), 0.0, timedelta(hours=4)),
    ],
)
def test_a_reset_that_has_passed_describes_a_window_that_has_rolled_over(rule, resets_in, spent, next_reset_in) -> None:
    w = WindowState("5h", timedelta(hours=5), NOW + resets_in, 50.0, 45.0, True)
    live = live_window(w, NOW)
    assert (live.spent, live.resets_at - NOW) == (spent, next_reset_in), rule


def test_the_resume_margin_widens_the_reserve() -> None:
    s = snap(w5=window(spent=37.0))  # inside a 20% reserve ($40 budget), not inside 25% ($37.50 - projection)
    assert evaluate(s, asking(burn=0.01), NOW).allowed
    assert evaluate(s, asking(burn=0.1), NOW, reserve_margin_pct=5.0).ceiling is Ceiling.SPOT_BUDGET


def test_incident_pooled_week_spent_accounts_do_not_hold_spot_work() -> None:
    """#693: 2 of 7 accounts week-spent, every 5-hour counter at 0.0. The pooled 5-hour figure is
    averaged over accounts whose week has room — 0.0 — so nothing holds spot work."""
    from scheduler.ports import AccountReading
    from scheduler.rules.pool import pool_utilization

    accounts = [AccountReading(f"a{i}", "active", 0.0, 1.0 if i < 2 else 0.3) for i in range(7)]
    avg = pool_utilization(accounts)
    five = window(spent=avg.utilization_5h, capacity=1.0, hours_left=4.9, calibrated=False)
    seven = window("7d", spent=avg.utilization_7d, capacity=1.0, hours_left=120, calibrated=False)
    d = evaluate(Snapshot(policy(), (five, seven)), asking(), NOW)
    assert avg.utilization_5h == 0.0 and d.allowed


def test_incident_priority_only_fleet_keeps_the_waiver() -> None:
    d = evaluate(
        snap(w5=window(spent=30.0, hours_left=2), fleet=[prio_turn(i, 0.02) for i in range(3)]), asking(burn=0.5), NOW
    )
    assert d.allowed and d.waiver_applied and d.spot_in_flight == 0


def test_incident_the_asking_session_is_not_spot_work_in_flight() -> None:
    d = evaluate(
        snap(w5=window(spent=30.0, hours_left=2), fleet=[spot_turn(99, 0.5)]), asking(running=True, burn=0.5), NOW
    )
    assert d.waiver_applied and d.allowed


def test_decide_falls_open_on_any_error() -> None:
    broken = Snapshot(policy(), (window(hours_left=2),), fleet=(spot_turn(1, burn="x"),))  # type: ignore[arg-type]
    d = decide(broken, asking(), NOW)
    assert d.allowed and d.reason is Reason.UNAVAILABLE and "TypeError" in (d.error or "")


@pytest.mark.parametrize(
    ("name", "snapshot", "who", "why", "until"),
    [
        (
            "fleet cap",
            snap(
                w5=window(spent=0, capacity=5000),
                w7=window("7d", spent=0, capacity=50000),
                fleet=[spot_turn(i, 0.001) for i in range(10)],
            ),
            asking(burn=0.001),
            "every session slot is taken (10.0 of 10 in use, 10 running)",
            "Held until a running session finishes and frees a slot.",
        ),
        (
            "pacing",
            snap(w5=window(spent=30.0, hours_left=2), fleet=[spot_turn(1, burn=0.07)]),
            asking(burn=0.02),
            "spending faster than the 5-hour window can carry",
            "Held until the fleet's burn falls to or below $0.06/min; the budget and a free slot still have to hold.",
        ),
        (
            "nothing fits",
            snap(w5=window(spent=30.0, hours_left=2), fleet=[spot_turn(1, burn=0.01)]),
            asking(burn=0.5),
            "spending faster",
            "nothing fits beside the work already running",
        ),
        (
            "budget",
            snap(w5=window(spent=41.0)),
            asking(),
            "window has no non-reserved budget left",
            "Held until the 5-hour window rolls over at 2026-11-02 11:30 UTC",
        ),
    ],
)
def test_the_two_sentences(name, snapshot, who, why, until) -> None:
    text = explain(evaluate(snapshot, who, NOW), NOW)
    assert why in text.why and until in text.until, (name, text)


def test_a_budget_held_on_what_is_projected_is_not_held_until_the_rollover() -> None:
    """$1 of the 5-hour spot budget is left and the fleet's next ten minutes would spend more: a
    running session finishing frees it — the rollover is only the upper bound."""
    burning = [prio_turn(i, 0.2) for i in range(2)]
    d = evaluate(snap(w5=window(spent=39.0, hours_left=4), fleet=burning), asking(burn=0.05), NOW)
    assert d.ceiling is Ceiling.SPOT_BUDGET and d.reason is Reason.AT_UTILIZATION_LIMIT
    text = explain(d, NOW)
    assert text.why.startswith("Held by the spot gate's budget: ")
    assert not text.until.startswith("Held until the 5-hour window rolls over")
    assert "($1.00 left)" in text.until and "a running session finishing can free it" in text.until
    assert "an upper bound on the wait, not a forecast" in text.until


def test_the_two_at_utilization_limit_holds_say_which_check_held() -> None:
    spent = explain(evaluate(snap(w5=window(spent=41.0)), asking(), NOW), NOW).why
    paced = explain(
        evaluate(snap(w5=window(spent=30.0, hours_left=2), fleet=[spot_turn(1, burn=0.07)]), asking(burn=0.02), NOW),
        NOW,
    ).why
    assert spent.startswith("Held by the spot gate's budget: ")
    assert paced.startswith("Held by the spot gate's pace: ")


def test_pacing_until_offers_the_rollover_as_an_upper_bound_only() -> None:
    text = explain(
        evaluate(snap(w5=window(spent=30.0, hours_left=2), fleet=[spot_turn(1, burn=0.07)]), asking(burn=0.02), NOW),
        NOW,
    )
    assert "an upper bound on the wait, not a forecast" in text.until


def test_fraction_mode_is_never_rendered_as_dollars() -> None:
    d = evaluate(
        snap(
            w5=window(spent=0.85, capacity=1.0, calibrated=False),
            w7=window("7d", spent=0.1, capacity=1.0, calibrated=False),
        ),
        asking(),
        NOW,
    )
    why = explain(d, NOW).why
    assert "$" not in why and "not calibrated yet" in why and "85.0%" in why


money = st.floats(min_value=0, max_value=1000, allow_nan=False)
burns = st.floats(min_value=0, max_value=5, allow_nan=False)


@st.composite
def snapshots(draw):
    cap5 = draw(st.floats(min_value=1, max_value=1000))
    cap7 = draw(st.floats(min_value=1, max_value=10000))
    w5 = window(
        spent=draw(st.floats(min_value=0, max_value=cap5 * 1.2)),
        capacity=cap5,
        hours_left=draw(st.floats(min_value=0, max_value=5)),
    )
    w7 = window(
        "7d",
        spent=draw(st.floats(min_value=0, max_value=cap7 * 1.2)),
        capacity=cap7,
        hours_left=draw(st.floats(min_value=0, max_value=168)),
    )
    fleet = [
        FleetTurn(i, draw(st.booleans()), draw(st.booleans()), draw(burns)) for i in range(draw(st.integers(0, 14)))
    ]
    pol = policy(
        reserve_5h_pct=draw(st.floats(0, 100)),
        reserve_7d_pct=draw(st.floats(0, 100)),
        max_sessions=draw(st.integers(1, 15)),
    )
    return Snapshot(pol, (w5, w7), tuple(fleet), draw(st.integers(1, 15)))


@given(snapshots(), burns, st.booleans())
def test_never_admits_a_spot_turn_whose_projection_crosses_the_reserve(s, burn, running) -> None:
    """Ten minutes of burn, or the burn to the rollover when that is nearer: either way no spot
    turn is admitted whose spend inside the window would reach the reserve."""
    who = Asking(1000, True, running, True, burn)
    d = evaluate(s, who, NOW)
    if d.allowed:
        fleet_burn = sum(t.burn_per_min for t in s.fleet if t.spends_quota)
        for w in s.windows:
            live = live_window(w, NOW)
            minutes_left = (live.resets_at - NOW).total_seconds() / 60
            reserve = w.capacity * s.policy.reserve_pct(w.name) / 100
            assert (
                live.spent + (fleet_burn + burn) * min(PROJECTION_MINUTES, minutes_left) <= w.capacity - reserve + 1e-9
            )
            if minutes_left >= PROJECTION_MINUTES:
                assert live.spent + (fleet_burn + burn) * PROJECTION_MINUTES <= w.capacity - reserve + 1e-9


@given(snapshots(), burns, st.booleans())
def test_priority_is_never_held(s, burn, running) -> None:
    assert evaluate(s, Asking(1000, False, running, True, burn), NOW).allowed


@given(snapshots(), burns, st.booleans())
def test_the_decision_is_a_function_of_snapshot_and_now(s, burn, running) -> None:
    who = Asking(1000, True, running, True, burn)
    assert evaluate(s, who, NOW) == evaluate(s, who, NOW)


def test_the_unneeded_pace_is_named_on_the_weekly_figures() -> None:
    s = snap(
        w5=window(spent=0.0, capacity=300.0, hours_left=4), w7=window("7d", spent=0.0, capacity=12000.0, hours_left=164)
    )
    d = evaluate(s, asking(burn=0.25), NOW)
    assert d.figures("7d").pace_unneeded and not d.figures("5h").pace_unneeded
    # the bound: 240 left in this 5-hour window + 32 more whole windows of 240 = 7,920 <= 9,600
    assert pace_unneeded(list(s.windows), {"5h": 20.0, "7d": 20.0}, NOW) == {"7d"}
    assert pace_unneeded(list(s.windows), {"5h": 20.0, "7d": 35.0}, NOW) == set()  # 7,800 left: it could


def test_the_resume_margin_never_skips_a_pace_the_plain_reserves_need() -> None:
    """The margin narrows the longer window's room only: with it, the bound can only get
    stricter (a 5-hour reserve of 50% and a weekly one of 0%, five 5-hour windows to go)."""
    w5 = WindowState("5h", timedelta(hours=5), NOW + timedelta(hours=5), 10.0, 0.0, True)
    w7 = WindowState("7d", timedelta(days=7), NOW + timedelta(hours=25), 45.0, 20.2, True)
    reserves = {"5h": 50.0, "7d": 0.0}
    assert pace_unneeded([w5, w7], reserves, NOW) == set()
    assert pace_unneeded([w5, w7], reserves, NOW, margin_pct=5.0) == set()


@pytest.mark.parametrize(
    ("read_seconds_ago", "allowed"),
    [
        (0, True),  # a fresh reading: $239.85 + 7 s of $1.00/min stays under $240
        (4, False),  # reused for 4 s: the fleet's $0.75/min since then is in no reading, and crosses
    ],
)
def test_the_cap_projects_from_the_reading_not_from_now(read_seconds_ago, allowed) -> None:
    """P15, the predictive ceiling: seven seconds before a rollover, the cap's horizon is seven
    seconds, and spend since a reading taken a few seconds earlier is what crossed the line in the
    saturated example. The projection starts at the reading."""
    w5 = replace(
        window(spent=239.85, capacity=300.0, hours_left=7 / 3600), read_at=NOW - timedelta(seconds=read_seconds_ago)
    )
    fleet = tuple(spot_turn(i, burn=0.25) for i in range(3))
    decision = evaluate(snap(w5=w5, fleet=fleet), asking(burn=0.25), NOW)
    assert decision.allowed is allowed, decision.windows
    assert allowed or (
        decision.ceiling is Ceiling.SPOT_BUDGET and decision.paced_windows == ()
    )  # the cap, not the pace


def test_a_reading_older_than_the_window_counts_only_the_window_s_own_minutes() -> None:
    w = replace(window(hours_left=1.0), read_at=NOW - timedelta(hours=9))
    assert unrecorded_minutes(w, NOW) == pytest.approx(4 * 60)  # since the window opened, not the reading
    assert unrecorded_minutes(replace(w, read_at=None), NOW) == 0.0
