"""The account pool: seed 001's "Read across the whole pool, not one account" and "When the pool
comes back", one table row per rule, the #693 incident by name, and a hypothesis property."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.ports import AccountReading
from scheduler.rules.pool import (
    CapacityState,
    PoolCapacity,
    capacity_sentence,
    countdown,
    countdown_clock,
    pool_capacity,
    pool_utilization,
    weekly_reset_sentence,
)

NOW = datetime(2026, 9, 10, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)
M = timedelta(minutes=1)


def acct(
    name: str,
    u5: float | None,
    u7: float | None,
    *,
    status: str = "active",
    r5: datetime | None = None,
    r7: datetime | None = None,
) -> AccountReading:
    return AccountReading(name, status, u5, u7, r5, r7)


# --- pool_utilization --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "accounts", "u5", "u7", "n5", "n7"),
    [
        (
            "every status counts: needs_reauth and quota_exceeded are averaged like active",
            [
                acct("a", 0.2, 0.4),
                acct("b", 0.4, 0.6, status="needs_reauth"),
                acct("c", 0.6, 0.8, status="quota_exceeded"),
            ],
            0.4,
            0.6,
            3,
            3,
        ),
        (
            "the 7-day figure averages every account with a 7-day reading, week-spent ones included",
            [acct("a", 0.1, 0.5), acct("b", 0.3, 1.0)],
            0.1,
            0.75,
            1,
            2,
        ),
        (
            "the 5-hour figure leaves out an account whose week is spent",
            [acct("a", 0.2, 0.5), acct("b", 0.9, 1.0), acct("c", 0.4, 0.3)],
            0.3,
            0.6,
            2,
            3,
        ),
        (
            "the 5-hour figure falls back to the whole pool when every week is spent",
            [acct("a", 0.2, 1.0), acct("b", 1.0, 1.2)],
            0.6,
            1.1,
            2,
            2,
        ),
        (
            "an account with no 5-hour reading leaves the 5-hour denominator",
            [acct("a", None, 0.2), acct("b", 0.5, 0.4)],
            0.5,
            0.3,
            1,
            2,
        ),
        (
            "an account with no 7-day reading leaves the 7-day denominator and is not week-spent",
            [acct("a", 0.6, None), acct("b", 0.2, 0.4)],
            0.4,
            0.4,
            2,
            1,
        ),
        (
            "a reading above 100% is averaged as read, never clamped",
            [acct("a", 1.3, 0.5), acct("b", 0.1, 0.5)],
            0.7,
            0.5,
            2,
            2,
        ),
        (
            "no 5-hour reading anywhere leaves the 5-hour figure empty, the 7-day one stands",
            [acct("a", None, 0.2)],
            None,
            0.2,
            0,
            1,
        ),
    ],
)
def test_pool_utilization(rule, accounts, u5, u7, n5, n7) -> None:
    avg = pool_utilization(accounts)
    assert avg is not None, rule
    expected = tuple(None if v is None else pytest.approx(v) for v in (u5, u7))
    assert (avg.utilization_5h, avg.utilization_7d) == expected, rule
    assert (avg.averaged_5h, avg.averaged_7d) == (n5, n7), rule


@pytest.mark.parametrize(
    ("rule", "accounts"),
    [
        ("an empty pool has nothing to decide on", []),
        ("accounts with no reading at all have nothing to decide on", [acct("a", None, None, status="needs_reauth")]),
    ],
)
def test_nothing_readable_is_none(rule, accounts) -> None:
    assert pool_utilization(accounts) is None, rule


def test_incident_693_two_of_seven_week_spent_does_not_floor_the_5_hour_figure() -> None:
    """2026-09-10: 2 of 7 accounts week-spent, all seven 5-hour counters at 0.0. Counting the
    spent ones at 100% read a pooled 28.57% against a curve at 25.15% and held 33 sessions."""
    accounts = [acct(f"spent-{i}", 0.0, 1.0, status="quota_exceeded") for i in range(2)]
    accounts += [acct(f"ok-{i}", 0.0, 0.55) for i in range(5)]
    avg = pool_utilization(accounts)
    assert avg is not None
    assert avg.utilization_5h == 0.0
    assert avg.averaged_5h == 5
    assert avg.week_spent == 2
    assert avg.utilization_7d == pytest.approx((2 * 1.0 + 5 * 0.55) / 7)
    assert avg.averaged == 7 and avg.accounts == 7
    assert not avg.fallback_5h


def test_the_averages_say_which_accounts_and_the_soonest_reset_of_each_window() -> None:
    accounts = [
        acct("a", 0.2, 0.5, r5=NOW + 2 * H, r7=NOW + 30 * H),
        acct("b", 0.4, 1.0, r5=NOW + 1 * H, r7=NOW + 10 * H),
        acct("c", None, None),
    ]
    avg = pool_utilization(accounts, now=NOW)
    assert avg is not None
    assert avg.names_5h == ("a",)
    assert avg.names_7d == ("a", "b")
    assert avg.next_reset_5h == NOW + 2 * H, "b's 5-hour reset is not the averaged window's"
    assert avg.next_reset_7d == NOW + 10 * H
    assert (avg.averaged, avg.accounts) == (2, 3)


def test_a_reading_whose_reset_has_passed_has_rolled_over() -> None:
    accounts = [acct("a", 0.9, 1.0, r5=NOW - M, r7=NOW - H), acct("b", 0.5, 0.5)]
    avg = pool_utilization(accounts, now=NOW)
    assert avg is not None
    assert avg.utilization_5h == pytest.approx(0.25)
    assert avg.utilization_7d == pytest.approx(0.25)
    assert avg.week_spent == 0
    assert avg.next_reset_5h is None, "a past reset is not something the pool is waiting for"


readings = st.floats(min_value=0.0, max_value=1.5, allow_nan=False)
maybe = st.one_of(st.none(), readings)


@given(st.lists(st.tuples(maybe, maybe, st.sampled_from(["active", "quota_exceeded", "needs_reauth"])), max_size=12))
def test_pool_averages_lie_within_the_readings_they_average(rows) -> None:
    accounts = [acct(f"a{i}", u5, u7, status=s) for i, (u5, u7, s) in enumerate(rows)]
    avg = pool_utilization(accounts)
    if all(u5 is None and u7 is None for u5, u7, _ in rows):
        assert avg is None
        return
    assert avg is not None
    by_name = {a.name: a for a in accounts}
    for figure, names, field in (
        (avg.utilization_5h, avg.names_5h, "utilization_5h"),
        (avg.utilization_7d, avg.names_7d, "utilization_7d"),
    ):
        values = [getattr(by_name[n], field) for n in names]
        if figure is None:
            assert not values
        else:
            assert min(values) - 1e-12 <= figure <= max(values) + 1e-12


# --- pool_capacity -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "accounts", "state", "resumes_at", "out", "read"),
    [
        (
            "an account with room on both windows means work is not blocked",
            [acct("a", 1.0, 0.5, r5=NOW + H), acct("b", 0.3, 0.4)],
            CapacityState.NOT_BLOCKED,
            None,
            1,
            2,
        ),
        (
            "an account over its 5-hour cap with week left comes back when the 5-hour window rolls",
            [acct("a", 1.0, 0.4, r5=NOW + 2 * H, r7=NOW + 50 * H)],
            CapacityState.COUNTDOWN,
            NOW + 2 * H,
            1,
            1,
        ),
        (
            "an account with an empty 5-hour window and its week spent comes back when its week does",
            [acct("a", 0.0, 1.0, r5=NOW + 4 * H, r7=NOW + 20 * M)],
            CapacityState.COUNTDOWN,
            NOW + 20 * M,
            1,
            1,
        ),
        (
            "an account out on both windows comes back at the later of the two resets",
            [acct("a", 1.0, 1.0, r5=NOW + 2 * H, r7=NOW + 30 * H)],
            CapacityState.COUNTDOWN,
            NOW + 30 * H,
            1,
            1,
        ),
        (
            "the pool's moment is the earliest across its accounts",
            [
                acct("a", 1.0, 0.2, r5=NOW + 3 * H),
                acct("b", 0.1, 1.0, r7=NOW + 20 * M),
                acct("c", 1.0, 1.0, r5=NOW + H, r7=NOW + 9 * H),
            ],
            CapacityState.COUNTDOWN,
            NOW + 20 * M,
            3,
            3,
        ),
        (
            "a weekly reset twenty minutes out beats a 5-hour rollover hours later",
            [acct("a", 0.0, 1.0, r7=NOW + 20 * M), acct("b", 1.0, 0.3, r5=NOW + 4 * H)],
            CapacityState.COUNTDOWN,
            NOW + 20 * M,
            2,
            2,
        ),
        (
            "everything out and no reset recorded: nothing here says when work resumes",
            [acct("a", 1.0, 0.2), acct("b", 0.0, 1.0, status="quota_exceeded")],
            CapacityState.UNKNOWN,
            None,
            2,
            2,
        ),
        (
            "an account out on a window with no recorded reset does not say when it returns",
            [acct("a", 1.0, 1.0, r5=NOW + H), acct("b", 1.0, 0.1, r5=NOW + 3 * H)],
            CapacityState.COUNTDOWN,
            NOW + 3 * H,
            2,
            2,
        ),
        (
            "a reset in the past is ignored: that window has rolled over and has room",
            [acct("a", 1.0, 0.5, r5=NOW - M)],
            CapacityState.NOT_BLOCKED,
            None,
            0,
            1,
        ),
        (
            "a past reset on one out window leaves the other window's reset as the moment",
            [acct("a", 1.0, 1.0, r5=NOW + H, r7=NOW - H)],
            CapacityState.COUNTDOWN,
            NOW + H,
            1,
            1,
        ),
        (
            "an account with no reading at all is not counted either way",
            [acct("a", None, None), acct("b", 1.0, 0.2, r5=NOW + H)],
            CapacityState.COUNTDOWN,
            NOW + H,
            1,
            1,
        ),
        (
            "status does not decide: a needs_reauth account with room on both windows has room",
            [acct("a", 0.1, 0.1, status="needs_reauth"), acct("b", 1.0, 0.2, r5=NOW + H)],
            CapacityState.NOT_BLOCKED,
            None,
            1,
            2,
        ),
        (
            "no account has a reading: nothing here says when work resumes",
            [acct("a", None, None)],
            CapacityState.UNKNOWN,
            None,
            0,
            0,
        ),
    ],
)
def test_pool_capacity(rule, accounts, state, resumes_at, out, read) -> None:
    cap = pool_capacity(accounts, NOW)
    assert (cap.state, cap.resumes_at, cap.accounts_out, cap.accounts_read) == (state, resumes_at, out, read), rule


@pytest.mark.parametrize(
    ("rule", "accounts", "next_reset", "blocked"),
    [
        ("no account weekly-blocked", [acct("a", 1.0, 0.9, r7=NOW + H)], None, 0),
        (
            "the soonest reset among week-spent accounts, counted apart",
            [acct("a", 0.0, 1.0, r7=NOW + 5 * H), acct("b", 0.0, 1.1, r7=NOW + 2 * H), acct("c", 0.0, 0.2, r7=NOW + M)],
            NOW + 2 * H, 2,
        ),
        (
            "a spent week with no reset still counts; the note is the count alone",
            [acct("a", 0.0, 1.0), acct("b", 0.0, 1.0)],
            None, 2,
        ),
        (
            "a weekly reset already passed is not counted: that week has rolled over",
            [acct("a", 0.0, 1.0, r7=NOW - H), acct("b", 0.0, 1.0, r7=NOW + 3 * H)],
            NOW + 3 * H, 1,
        ),
    ],
)
def test_next_weekly_reset(rule, accounts, next_reset, blocked) -> None:
    cap = pool_capacity(accounts, NOW)
    assert (cap.next_weekly_reset, cap.weekly_blocked) == (next_reset, blocked), rule


# --- the sentences -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "at", "expected"),
    [
        ("seconds under a minute", NOW + timedelta(seconds=45), "in 45s"),
        ("minutes under an hour", NOW + 22 * M, "in 22m"),
        ("hours with padded minutes", NOW + 3 * H + 5 * M, "in 3h 05m"),
        ("days and hours", NOW + 52 * H, "in 2d 4h"),
        ("a moment already passed reads now, never negative", NOW - M, "now"),
    ],
)
def test_countdown(rule, at, expected) -> None:
    assert countdown(at, NOW) == expected, rule


@pytest.mark.parametrize(
    ("rule", "at", "expected"),
    [
        ("a countdown with its UTC wall clock", NOW + 22 * M, "in 22m (2026-09-10 12:22 UTC)"),
        (
            "a passed moment says the reading is stale",
            NOW - M,
            "due 2026-09-10 11:59 UTC (passed; the reading is stale)",
        ),
    ],
)
def test_countdown_clock(rule, at, expected) -> None:
    assert countdown_clock(at, NOW) == expected, rule


def cap(state: CapacityState, **kw: object) -> PoolCapacity:
    base: dict[str, object] = {
        "resumes_at": None, "accounts_out": 0, "accounts_read": 0, "next_weekly_reset": None, "weekly_blocked": 0
    }
    base.update(kw)
    return PoolCapacity(state=state, **base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rule", "capacity", "now", "expected"),
    [
        (
            "the countdown names the wall-clock moment and how many accounts are out",
            cap(CapacityState.COUNTDOWN, resumes_at=NOW + 22 * M, accounts_out=7, accounts_read=7),
            NOW,
            "Work resumes in 22m (2026-09-10 12:22 UTC): 7 accounts are out of capacity.",
        ),
        (
            "a deadline that passed while the reading was shown says the reading is stale",
            cap(CapacityState.COUNTDOWN, resumes_at=NOW, accounts_out=1, accounts_read=1),
            NOW + M,
            "Work was due to resume at 2026-09-10 12:00 UTC (1 account is out of capacity); this reading is stale.",
        ),
        (
            "not blocked says how many accounts have room",
            cap(CapacityState.NOT_BLOCKED, accounts_out=2, accounts_read=7),
            NOW,
            "Work is not blocked: 5 of 7 accounts have room on both windows now.",
        ),
        (
            "unknown says which emptiness it is: out with no reset",
            cap(CapacityState.UNKNOWN, accounts_out=3, accounts_read=3),
            NOW,
            "Nothing here says when work resumes: 3 accounts are out of capacity and none recorded a reset time.",
        ),
        (
            "unknown says which emptiness it is: no reading",
            cap(CapacityState.UNKNOWN),
            NOW,
            "Nothing here says when work resumes: no account has a reading.",
        ),
    ],
)
def test_capacity_sentence(rule, capacity, now, expected) -> None:
    assert capacity_sentence(capacity, now) == expected, rule


@pytest.mark.parametrize(
    ("rule", "capacity", "expected"),
    [
        (
            "no account weekly-blocked says so",
            cap(CapacityState.NOT_BLOCKED),
            "Next 7-day reset: no account is weekly-blocked.",
        ),
        (
            "the soonest reset with the count",
            cap(CapacityState.COUNTDOWN, next_weekly_reset=NOW + 3 * H, weekly_blocked=2),
            "Next 7-day reset in 3h 00m (2026-09-10 15:00 UTC): 2 accounts week-spent.",
        ),
        (
            "no reset recorded: the count alone",
            cap(CapacityState.UNKNOWN, weekly_blocked=1),
            "Next 7-day reset: 1 account week-spent; none recorded when its week resets.",
        ),
    ],
)
def test_weekly_reset_sentence(rule, capacity, expected) -> None:
    assert weekly_reset_sentence(capacity, NOW) == expected, rule
