"""The reads behind the demand-aware pace (`scheduler.rules.demand`): what waits, what runs, and what
Pacer's own history says arrives.

What waits and what runs are read once per transaction, again after it writes a session or a turn.
The history — sessions created per genesis and hour of week over the last weeks, what a session of
each genesis spent, how long a runtime's turns run — is read up to the start of the current hour and
kept per engine until the next hour starts: whole hours are what it is bucketed by, so a read per
decision, or per minute, would learn nothing an hour-aligned one does not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col

from scheduler.rules.demand import HISTORY, ArrivalHistory, arrival_profile, hour_of_week
from scheduler.store.caches import cached, invalidated_by, kept_for
from scheduler.store.db import core, read_or_fail_open
from scheduler.store.models import Session, Status, Turn

WAITING_COUNTED = 1000  # more waiting sessions than this: the demand is not bounded, the pace holds

_WAITING_KEY = "demand.waiting"
_RUNNING_KEY = "demand.running"
_HISTORY_KEY = "demand.history"

_FIRST = (
    sa_select(col(Session.runtime))
    .where(col(Session.status) == Status.WAITING.value)
    .limit(WAITING_COUNTED + 1)
    .subquery()
)
_WAITING = sa_select(_FIRST.c.runtime, func.count()).group_by(_FIRST.c.runtime)
_RUNNING = sa_select(col(Turn.runtime), col(Turn.started_at)).where(col(Turn.status) == "running")

invalidated_by(_WAITING_KEY, Session)
invalidated_by(_RUNNING_KEY, Turn)


def waiting_by_runtime(db: DBSession) -> dict[str, int] | None:
    """How many sessions wait, per runtime; None when more than WAITING_COUNTED wait (or the
    sessions cannot be read): not counted to the end, so not bounded."""

    def load() -> dict[str, int] | None:
        found = {str(runtime): int(n) for runtime, n in core(db, _WAITING)}
        return None if sum(found.values()) > WAITING_COUNTED else found

    return cached(db, _WAITING_KEY, lambda: read_or_fail_open(db, "the waiting sessions", load, None))


def running_turns(db: DBSession) -> list[tuple[str, datetime | None]]:
    """(runtime, started at) of every turn a worker is executing now."""
    return cached(db, _RUNNING_KEY, lambda: [(str(r), at) for r, at in core(db, _RUNNING)])


@dataclass(frozen=True)
class Learned:
    """What the history says: expected quota dollars of new sessions per hour of week (None: too
    little history), and each runtime's mean turn length in minutes."""

    arrivals_per_hour: tuple[float, ...] | None
    turn_minutes: dict[str, float]


def learned(db: DBSession, now: datetime, spends_quota: Callable[[str], bool]) -> Learned | None:
    """The history up to the start of `now`'s hour, read once per hour per engine."""
    until = now.replace(minute=0, second=0, microsecond=0)
    return kept_for(
        db, _HISTORY_KEY, until,
        lambda: read_or_fail_open(db, "the arrival history", lambda: _learn(db, until, spends_quota), None),
    )


def _learn(db: DBSession, until: datetime, spends_quota: Callable[[str], bool]) -> Learned:
    since = until - HISTORY
    created = (col(Session.created_at) >= since, col(Session.created_at) < until)
    first: datetime | None = None
    counts: dict[tuple[str, int], int] = {}
    for genesis, at in core(db, sa_select(col(Session.genesis), col(Session.created_at)).where(*created)):
        counts[str(genesis), hour_of_week(at)] = counts.get((str(genesis), hour_of_week(at)), 0) + 1
        first = at if first is None or at < first else first
    finished = (*created, col(Turn.finished_at).is_not(None))
    priced: dict[str, int] = {  # sessions with a finished turn: what a session spends is known of these
        str(g): int(n)
        for g, n in core(db, sa_select(col(Session.genesis), func.count(func.distinct(col(Session.id))))
                         .join(Turn, col(Turn.session_id) == col(Session.id)).where(*finished)
                         .group_by(col(Session.genesis)))
    }
    spent: dict[str, float] = {}
    stmt: Any = (
        sa_select(col(Session.genesis), col(Turn.runtime), func.sum(col(Turn.cost_usd)))
        .join(Session, col(Session.id) == col(Turn.session_id))
        .where(*finished)
        .group_by(col(Session.genesis), col(Turn.runtime))
    )
    for genesis, runtime, cost in core(db, stmt):
        if spends_quota(str(runtime)):
            spent[str(genesis)] = spent.get(str(genesis), 0.0) + float(cost or 0.0)
    per_session = {g: spent.get(g, 0.0) / n for g, n in priced.items() if n > 0}
    minutes = {
        str(runtime): float(ms) / 60_000.0
        for runtime, ms in core(db, sa_select(col(Turn.runtime), func.avg(col(Turn.duration_ms))).where(
            col(Turn.finished_at) >= since, col(Turn.duration_ms).is_not(None)).group_by(col(Turn.runtime)))
        if ms is not None
    }
    history = ArrivalHistory(first, until, counts, per_session) if first is not None else None
    return Learned(arrival_profile(history), minutes)
