"""The account pool, read as one: the pooled utilization of each window and when the pool comes
back (seed 001, "Read across the whole pool, not one account" and "When the pool comes back").

Pure functions over `scheduler.ports.AccountReading`; the clock is an argument.

    averages = pool_utilization(reading.accounts, now=now)   # None: nothing readable
    capacity = pool_capacity(reading.accounts, now)
    capacity_sentence(capacity, now)    # "Work resumes in 22m (2026-11-02 09:22 UTC) …"
    weekly_reset_sentence(capacity, now)
    countdown_clock(at, now)            # "in 22m (2026-11-02 09:22 UTC)"

The averaging rules, each with its reason:
  * Every account counts whatever its status. A needs_reauth account's windows keep draining
    while it waits for a human; leaving it out would make the average jump every time an
    account fell out of the pool or came back.
  * The 7-day figure averages every account with a 7-day reading.
  * The 5-hour figure averages only accounts whose week still has room, because those are the
    accounts a turn could land on (an account with no 7-day reading is not known to be spent,
    so it counts as having room). Counting a week-spent account at 100% there put a floor of
    weekly-spent / accounts-read under a curve that restarts at zero every five hours (#693).
    When nothing servable has a 5-hour reading, the figure falls back to the whole pool.
  * An account with no reading for a window leaves that window's denominator; the result says
    how many accounts each figure averaged.
  * A reset time that has already passed describes a window that has rolled over: given `now`,
    its reading counts as 0.0 and nothing waits on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from scheduler.ports import AccountReading
from templates import render

ACCOUNT_STATUSES = ("active", "quota_exceeded", "needs_reauth")
FULL = 1.0  # a window at or above this fraction has no room left


@dataclass(frozen=True)
class PoolAverages:
    """The pooled figures, and how many accounts each one averaged."""

    utilization_5h: float | None
    utilization_7d: float | None
    averaged_5h: int
    averaged_7d: int
    averaged: int  # accounts behind at least one of the two figures
    accounts: int  # accounts in the pool, read or not
    week_spent: int  # accounts left out of the 5-hour figure because their week is spent
    fallback_5h: bool  # the 5-hour figure averaged the whole pool: nothing servable was read
    names_5h: tuple[str, ...] = ()  # the accounts behind each figure
    names_7d: tuple[str, ...] = ()
    next_reset_5h: datetime | None = None  # soonest recorded future reset among those accounts
    next_reset_7d: datetime | None = None


class CapacityState(StrEnum):
    COUNTDOWN = "countdown"  # every read account is out; at least one says when it returns
    NOT_BLOCKED = "not_blocked"  # some account has room on both windows now
    UNKNOWN = "unknown"  # everything read is out and none recorded a reset


@dataclass(frozen=True)
class PoolCapacity:
    """When the pool can serve a request again, and the weekly detail behind it."""

    state: CapacityState
    resumes_at: datetime | None  # COUNTDOWN only: the earliest moment an account comes back
    accounts_out: int
    accounts_read: int
    next_weekly_reset: datetime | None  # soonest future 7-day reset among week-spent accounts
    weekly_blocked: int  # accounts whose week is spent (counted whether or not they say when)


def _live(utilization: float | None, reset: datetime | None, now: datetime | None) -> float | None:
    """The reading as it stands now: a window whose reset has passed has rolled over."""
    if utilization is None:
        return None
    if now is not None and reset is not None and reset <= now:
        return 0.0
    return utilization


def _is_spent(utilization: float | None) -> bool:
    return utilization is not None and utilization >= FULL


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def pool_utilization(
    accounts: Sequence[AccountReading], *, now: datetime | None = None
) -> PoolAverages | None:
    """The pooled 5-hour and 7-day utilization, or None when no account has a readable window
    (the gate then fails open on no_snapshot). `now`, when given, retires readings whose reset
    has passed."""
    live = [
        (
            _live(account.utilization_5h, account.reset_5h, now),
            _live(account.utilization_7d, account.reset_7d, now),
        )
        for account in accounts
    ]
    if all(five is None and seven is None for five, seven in live):
        return None

    in_7d = [seven is not None for _, seven in live]
    fallback = not any(five is not None and not _is_spent(seven) for five, seven in live)
    in_5h = [five is not None and (fallback or not _is_spent(seven)) for five, seven in live]
    fives = [five for (five, _), counted in zip(live, in_5h) if counted and five is not None]
    sevens = [seven for _, seven in live if seven is not None]
    return PoolAverages(
        utilization_5h=_mean(fives) if fives else None,
        utilization_7d=_mean(sevens) if sevens else None,
        averaged_5h=len(fives),
        averaged_7d=len(sevens),
        averaged=sum(1 for a, b in zip(in_5h, in_7d) if a or b),
        accounts=len(accounts),
        week_spent=sum(1 for seven in sevens if _is_spent(seven)),
        fallback_5h=fallback and bool(fives),
        names_5h=tuple(a.name for a, counted in zip(accounts, in_5h) if counted),
        names_7d=tuple(a.name for a, counted in zip(accounts, in_7d) if counted),
        next_reset_5h=_soonest((a.reset_5h for a, c in zip(accounts, in_5h) if c), now),
        next_reset_7d=_soonest((a.reset_7d for a, c in zip(accounts, in_7d) if c), now),
    )


def _soonest(resets: Iterable[datetime | None], now: datetime | None) -> datetime | None:
    future = [r for r in resets if r is not None and (now is None or r > now)]
    return min(future) if future else None


def _waiting_on(
    utilization: float | None, reset: datetime | None, now: datetime
) -> tuple[bool, datetime | None]:
    """(is this window out of room, the future reset it waits for if one is recorded)."""
    live = _live(utilization, reset, now)
    if live is None or live < FULL:
        return False, None
    return True, reset if reset is not None and reset > now else None


def _comes_back(account: AccountReading, now: datetime) -> tuple[bool, bool, datetime | None]:
    """(has a reading, is out, when it comes back). The moment is the later of the resets it is
    actually waiting on; a window with room — or with no reading — contributes nothing, and an
    out window with no recorded reset leaves the moment unknown."""
    read = account.utilization_5h is not None or account.utilization_7d is not None
    waits = [
        _waiting_on(account.utilization_5h, account.reset_5h, now),
        _waiting_on(account.utilization_7d, account.reset_7d, now),
    ]
    out = [reset for is_out, reset in waits if is_out]
    if not out:
        return read, False, None
    known = [reset for reset in out if reset is not None]
    return read, True, max(known) if len(known) == len(out) else None


def pool_capacity(accounts: Sequence[AccountReading], now: datetime) -> PoolCapacity:
    """The pool's moment of return — the earliest across accounts of each account's own moment —
    and the Next 7-day reset note, measured only over accounts whose week is spent."""
    read = out = 0
    moments: list[datetime] = []
    weekly_blocked = 0
    weekly_resets: list[datetime] = []
    for account in accounts:
        has_reading, is_out, moment = _comes_back(account, now)
        read += has_reading
        out += is_out
        if moment is not None:
            moments.append(moment)
        week_out, week_reset = _waiting_on(account.utilization_7d, account.reset_7d, now)
        weekly_blocked += week_out
        if week_reset is not None:
            weekly_resets.append(week_reset)
    if read and out < read:
        state, resumes_at = CapacityState.NOT_BLOCKED, None
    elif moments:
        state, resumes_at = CapacityState.COUNTDOWN, min(moments)
    else:
        state, resumes_at = CapacityState.UNKNOWN, None
    return PoolCapacity(
        state=state,
        resumes_at=resumes_at,
        accounts_out=out,
        accounts_read=read,
        next_weekly_reset=min(weekly_resets) if weekly_resets else None,
        weekly_blocked=weekly_blocked,
    )


def countdown(at: datetime, now: datetime) -> str:
    """A wait as people say it: "in 45s", "in 22m", "in 3h 05m", "in 2d 4h"; "now" once the
    moment has passed (the caller says the reading is stale rather than counting negative)."""
    seconds = int((at - now).total_seconds())
    if seconds <= 0:
        return "now"
    if seconds < 60:
        return f"in {seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"in {minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"in {hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"in {days}d {hours}h"


def countdown_clock(at: datetime, now: datetime) -> str:
    """The countdown beside the UTC wall clock: what a reader acts on, and what survives being
    quoted into a later message."""
    return render("text/countdown.j2", **_moment(at, now))


def _moment(at: datetime | None, now: datetime) -> dict[str, object]:
    if at is None:
        return {"at": None, "countdown": None, "stale": False}
    return {"at": at, "countdown": countdown(at, now), "stale": at <= now}


def capacity_sentence(capacity: PoolCapacity, now: datetime) -> str:
    """The headline: a countdown to a wall-clock moment, "not blocked", or "nothing here says"."""
    return render(
        f"text/pool_{capacity.state.value}.j2", c=capacity, **_moment(capacity.resumes_at, now)
    )


def weekly_reset_sentence(capacity: PoolCapacity, now: datetime) -> str:
    """The detail under the weekly figure: the soonest 7-day reset among week-spent accounts."""
    return render(
        "text/pool_weekly_reset.j2", c=capacity, **_moment(capacity.next_weekly_reset, now)
    )


__all__ = [
    "ACCOUNT_STATUSES",
    "CapacityState",
    "PoolAverages",
    "PoolCapacity",
    "capacity_sentence",
    "countdown",
    "countdown_clock",
    "pool_capacity",
    "pool_utilization",
    "weekly_reset_sentence",
]
