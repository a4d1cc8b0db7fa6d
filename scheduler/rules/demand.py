"""The demand-aware pace (issue 32, P20 item 1): the pacing curve holds only when it must.

Seed 001 says a deployment idles only because it has spent its budget, never because the gate
was careful. The curve spreads work out so the budget lasts to the rollover; when everything the
window can still be asked for fits in what it has left, spreading protects nothing. So, for each
calibrated window whose curve the fleet is ahead of, the pace does not hold when

    (committed + waiting + arrivals) x (1 + DEMAND_MARGIN_PCT / 100)  <=  spot budget left

  committed  what the running turns are still expected to spend before the rollover: their burn
             over what is left of their expected turn length (at least the cap's ten minutes);
  waiting    every waiting session, one expected turn each: its burn x its runtime's expected
             turn minutes (none longer than the window has left);
  arrivals   the sessions expected to be created before the rollover, from Pacer's own history:
             per genesis and hour of week, times what a session of that genesis has spent.

Otherwise it holds as the curve says. Anything unknown (no history yet, more waiting than was
counted) holds as the curve says: the demand has to be shown to fit. The cap and the reserve are
not touched here: they hold whatever the demand is. Pure: the figures arrive as plain values
(`scheduler.store.demand_reads` reads them, `scheduler.engine.fleet` prices them).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, TypeVar

DEMAND_MARGIN_PCT = 50.0  # the expected demand must fit one and a half times over
HISTORY = timedelta(weeks=4)  # how far back arrivals are learned from
MIN_HISTORY = timedelta(hours=1)  # less history than this says nothing about arrivals
PRIOR_HOURS = 2.0  # an hour of week's rate leans on the genesis's mean rate as if seen this long
DEFAULT_TURN_MINUTES = 30.0  # a runtime with no finished turn yet
MIN_REMAINING_MINUTES = 10.0  # a running turn past its expected length still runs this long
HOURS_OF_WEEK = 168
_HOUR = timedelta(hours=1)

T = TypeVar("T")


def hour_of_week(at: datetime) -> int:
    """0 for Monday 00:00–01:00 UTC … 167 for Sunday 23:00–24:00."""
    return at.weekday() * 24 + at.hour


def _hour_start(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def _hours_by_hour_of_week(start: datetime, end: datetime) -> list[float]:
    """How many hours of [start, end) fall in each hour of week: the first and the last hour as
    the fractions of them inside, every whole hour between as 1.0 — each hour of week's figure is
    the one a walk hour by hour adds up, to the last bit (the same additions in the same order),
    without walking a week of hours: the gate asks it per decision, the forecast per queue pass."""
    hours = [0.0] * HOURS_OF_WEEK
    if not start < end:
        return hours
    first = hour_of_week(start)
    at = min(_hour_start(start) + _HOUR, end)
    hours[first] += (at - start) / _HOUR
    if at >= end:
        return hours
    last = _hour_start(end)
    weeks, extra = divmod((last - at) // _HOUR, HOURS_OF_WEEK)
    h0 = hour_of_week(at)
    for k in range(HOURS_OF_WEEK):
        n = weeks + (1 if k < extra else 0)
        h = (h0 + k) % HOURS_OF_WEEK
        if n and h == first:  # it holds the first hour's fraction: add the whole ones one by one, as the walk does
            for _ in range(n):
                hours[h] += 1.0
        elif n:
            hours[h] = float(n)
    if last < end:
        hours[hour_of_week(last)] += (end - last) / _HOUR
    return hours


@dataclass(frozen=True)
class ArrivalHistory:
    """Sessions created over [since, until), per genesis and hour of week, and what a session of
    each genesis has spent against the quota (the runtimes that spend none count at $0)."""

    since: datetime
    until: datetime
    counts: Mapping[tuple[str, int], int]
    cost_per_session: Mapping[str, float]


def arrival_profile(history: ArrivalHistory | None) -> tuple[float, ...] | None:
    """Expected quota dollars of new sessions per hour, for each hour of week; None when the
    history is too short to say (or nothing in it has spent yet, so no session can be priced).

    An hour of week's rate is its own count over the hours of it the history saw, smoothed
    towards the genesis's mean rate by PRIOR_HOURS: a history shorter than a week has not seen
    most hours of the week yet, and one hour seen once is a noisy count."""
    if history is None or history.until - history.since < MIN_HISTORY:
        return None
    exposure = _hours_by_hour_of_week(history.since, history.until)
    total_hours = sum(exposure)
    totals: dict[str, int] = {}
    for (genesis, _), n in history.counts.items():
        totals[genesis] = totals.get(genesis, 0) + n
    priced = [c for c in history.cost_per_session.values()]
    if totals and not priced:
        return None
    fallback = sum(priced) / len(priced) if priced else 0.0
    profile = []
    for h in range(HOURS_OF_WEEK):
        usd = 0.0
        for genesis, total in totals.items():
            mean = total / total_hours
            rate = (history.counts.get((genesis, h), 0) + PRIOR_HOURS * mean) / (exposure[h] + PRIOR_HOURS)
            usd += rate * history.cost_per_session.get(genesis, fallback)
        profile.append(usd)
    return tuple(profile)


def expected_arrivals(profile: tuple[float, ...], now: datetime, until: datetime) -> float:
    """Quota dollars the sessions expected to be created in [now, until) will spend."""
    hours = _hours_by_hour_of_week(now, until)
    return sum(h * usd for h, usd in zip(hours, profile, strict=True))


@dataclass(frozen=True)
class RunningTurn:
    burn_per_min: float
    started_at: datetime | None
    expected_minutes: float


@dataclass(frozen=True)
class WaitingGroup:
    """Waiting sessions of one runtime: how many, its burn and its expected turn length."""

    count: int
    burn_per_min: float
    expected_minutes: float


@dataclass(frozen=True)
class Demand:
    running: tuple[RunningTurn, ...] = ()
    waiting: tuple[WaitingGroup, ...] = ()
    waiting_overflow: bool = False  # more sessions wait than were counted: the demand is not bounded
    arrivals_per_hour: tuple[float, ...] | None = None  # by hour of week; None: no history to learn from


@dataclass(frozen=True)
class DemandCheck:
    """One window's demand against its room, in dollars. None: not known."""

    committed: float
    waiting: float | None
    arrivals: float | None
    room: float  # the window's spot budget left
    margin_pct: float
    holds: bool

    @property
    def total(self) -> float | None:
        if self.waiting is None or self.arrivals is None:
            return None
        return self.committed + self.waiting + self.arrivals


def pace_holds(
    committed: float, waiting: float | None, arrivals: float | None, room: float, margin_pct: float = DEMAND_MARGIN_PCT
) -> bool:
    """Whether the pace must hold: the demand is not known, or it does not fit the room with the margin."""
    if waiting is None or arrivals is None or not math.isfinite(room):
        return True
    return (committed + waiting + arrivals) * (1.0 + margin_pct / 100.0) > room


def check(demand: Demand, room: float, now: datetime, resets_at: datetime) -> DemandCheck:
    """The demand a window can still be asked for before it rolls over, against its `room`."""
    left = max((resets_at - now).total_seconds() / 60.0, 0.0)
    committed = 0.0
    for t in demand.running:
        ran = max((now - t.started_at).total_seconds() / 60.0, 0.0) if t.started_at is not None else 0.0
        committed += t.burn_per_min * min(max(t.expected_minutes - ran, MIN_REMAINING_MINUTES), left)
    waiting = (
        None
        if demand.waiting_overflow
        else sum(g.count * g.burn_per_min * min(g.expected_minutes, left) for g in demand.waiting)
    )
    profile = demand.arrivals_per_hour
    arrivals = expected_arrivals(profile, now, resets_at) if profile is not None else None
    return DemandCheck(
        committed, waiting, arrivals, room, DEMAND_MARGIN_PCT, pace_holds(committed, waiting, arrivals, room)
    )


class Deferred(Generic[T]):
    """A value read only when first asked for, then kept: the gate asks for the demand only when
    the fleet is ahead of a curve, so a decision the curve admits reads nothing more."""

    def __init__(self, load: Callable[[], T | None]) -> None:
        self._load: Callable[[], T | None] | None = load
        self._value: T | None = None

    def get(self) -> T | None:
        if self._load is not None:
            load, self._load = self._load, None
            self._value = load()
        return self._value
