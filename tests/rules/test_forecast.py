"""The start-time forecast as a pure rule (issue 32, P20 item 2): the present state run forward with
the scheduler's own gate — slots freed by turns ending, a spent budget waiting for its window's
reset, priority first — the median and the range of the runs, and what it refuses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.rules.forecast import HORIZON, Arrivals, Outlook, Work, forecast, spread
from scheduler.rules.snapshot import PolicyView, WindowState

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


def policy(max_sessions: int = 2) -> PolicyView:
    return PolicyView(True, 20.0, 20.0, max_sessions, True, {}, demand_pacing=False)


def work(sid: int, *, spot: bool = True, age: int = 0, started: int | None = None, precedence: int = 0) -> Work:
    created = (NOW - timedelta(minutes=100 - sid + age)).timestamp()
    return Work(sid, (1 if spot else 0, -precedence, created, sid), spot, True, 0.25, "claude_code",
                started_at=None if started is None else NOW - started * MIN)


ROOMY = (WindowState("5h", timedelta(hours=5), NOW + 4 * timedelta(hours=1), 1e6, 0.0, True, NOW),)


def outlook(running: tuple[Work, ...], waiting: tuple[Work, ...], **kw: object) -> Outlook:
    """Two slots and a budget nothing here can spend: only the slots hold (with no quota reading
    at all the gate falls open, and so does the forecast)."""
    base: dict[str, object] = dict(policy=policy(), agent_workers=12, windows=ROOMY, running=running, waiting=waiting,
                                   turn_minutes={"claude_code": (30.0,)})
    return Outlook(**{**base, **kw})  # type: ignore[arg-type]


def test_waiters_take_the_slots_the_running_turns_free_in_queue_order() -> None:
    # Two slots, both busy for another 20 and 25 minutes; every turn runs 30.
    state = outlook((work(1, started=10), work(2, started=5)), (work(3), work(4), work(5)))
    found = forecast(state, NOW)
    assert {sid: (f.median - NOW) / MIN for sid, f in found.items()} == {3: 20, 4: 25, 5: 50}
    assert all(f.low == f.median == f.high for f in found.values())  # nothing drawn varies: no range


def test_priority_goes_first_whatever_its_age() -> None:
    state = outlook((work(1, started=10), work(2, started=10)), (work(3), work(4, spot=False, age=-50)))
    found = forecast(state, NOW)
    assert (found[4].median - NOW) / MIN == 0  # priority is never held: it starts at once, beside the full fleet
    assert (found[3].median - NOW) / MIN == 20


def test_a_spent_budget_holds_spot_work_until_its_window_rolls_over() -> None:
    windows = (WindowState("5h", timedelta(hours=5), NOW + 90 * MIN, 300.0, 240.0, True, NOW),)
    found = forecast(outlook((), (work(3),), windows=windows), NOW)
    assert found[3].median == NOW + 90 * MIN  # spent to the reserve: nothing before the reset, then at once


def test_a_turn_drawn_from_varied_lengths_gives_a_range_around_the_median() -> None:
    state = outlook((work(1, started=0), work(2, started=0)), (work(3), work(4), work(5)),
                    turn_minutes={"claude_code": tuple(float(m) for m in range(10, 70, 5))})
    found = forecast(state, NOW, seed=3)
    for f in found.values():
        assert f.low <= f.median and f.high is not None and f.median <= f.high and f.draws == 7
    assert found[5].high is not None and found[5].low < found[5].high
    assert forecast(state, NOW, seed=3) == found  # same inputs and seed, same forecast


def test_expected_priority_arrivals_take_slots_ahead_of_spot_waiters() -> None:
    state = outlook((work(1, started=0), work(2, started=0)), (work(3),),
                    arrivals=Arrivals(tuple(6.0 for _ in range(168)), "claude_code", 0.25))
    calm = forecast(outlook((work(1, started=0), work(2, started=0)), (work(3),)), NOW)
    busy = forecast(state, NOW)
    assert calm[3].median == NOW + 30 * MIN
    # Six priority sessions an hour take the freed slots first.
    assert busy[3].median > calm[3].median and busy[3].high is not None and busy[3].high > calm[3].high


def test_a_waiter_asleep_is_forecast_from_when_it_wakes() -> None:
    asleep = Work(**{**work(3).__dict__, "not_before": NOW + 45 * MIN})
    assert forecast(outlook((), (asleep,)), NOW)[3].median == NOW + 45 * MIN


def test_a_start_past_the_horizon_has_no_forecast_and_a_range_past_it_has_no_end() -> None:
    windows = (WindowState("7d", timedelta(days=7), NOW + HORIZON + 60 * MIN, 300.0, 240.0, True, NOW),)
    assert forecast(outlook((), (work(3),), windows=windows), NOW) == {}
    assert spread([NOW, NOW, None]) == (NOW, NOW, None)
    assert spread([NOW, None, None]) is None
    assert spread([]) is None


def test_draws_must_be_one_or_more() -> None:
    with pytest.raises(ValueError, match="draws must be >= 1"):
        forecast(outlook((), (work(3),)), NOW, draws=0)


def test_skipping_the_rechecks_a_pace_hold_cannot_pass_changes_no_forecast() -> None:
    """`_paced_for` is a lower bound: a run that asks the gate at every five-minute re-check finds
    every start at the same instant as one that skips the re-checks before the bound."""
    from scheduler.rules import forecast as rule

    dollars = (WindowState("5h", timedelta(hours=5), NOW + 200 * MIN, 300.0, 120.0, True, NOW),
               WindowState("7d", timedelta(days=7), NOW + timedelta(days=3), 12000.0, 5000.0, True, NOW))
    waiting = tuple(work(i) for i in range(5, 30))
    bound = rule._Run._paced_for
    skipped: list[float] = []

    def recorded(run: rule._Run, d: object) -> float:
        skipped.append(bound(run, d))  # type: ignore[arg-type]
        return skipped[-1]

    fraction = (WindowState("5h", timedelta(hours=5), NOW + 200 * MIN, 1.0, 0.6, False, NOW),)  # no dollars yet
    for learned, windows in ((False, dollars), (True, dollars), (False, fraction)):
        state = outlook(tuple(work(i, started=i) for i in range(1, 5)), waiting, windows=windows,
                        policy=PolicyView(True, 20.0, 20.0, 10, True, {}, demand_pacing=learned), learned=learned,
                        demand_usd_per_hour=tuple(5.0 for _ in range(168)),
                        turn_minutes={"claude_code": tuple(float(m) for m in range(15, 60, 3))},
                        follow_up={"claude_code": 0.4})
        try:
            rule._Run._paced_for = recorded  # type: ignore[method-assign]
            skipping = forecast(state, NOW, seed=5, draws=3)
            rule._Run._paced_for = lambda self, d: 0.0  # type: ignore[method-assign]
            asking_every_tick = forecast(state, NOW, seed=5, draws=3)
        finally:
            rule._Run._paced_for = bound  # type: ignore[method-assign]
        assert len(skipping) > 10 and skipping == asking_every_tick
    assert max(skipped) > 30  # re-checks were skipped: the bound is not vacuous
