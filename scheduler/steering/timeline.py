"""The last day's starts, pauses and preemptions, read from what the database records.

    start        every turn whose `started_at` falls in the span: exact, one mark per turn
    pause        a session paused now by the ceiling or parked on purpose, at its `pause_at`: the
                 row keeps one pause record and a resume clears it, so an ended pause is gone
    preemption   a session's `last_preempted_at` in the span (when the priority session marked
                 it): only its latest, with `preemption_count` (lifetime, not the day's) beside it

So starts are exact, and pauses and preemptions are a lower bound: a pause that has ended and a
session's earlier preemptions of the day do not show. The turns a pause or a preemption halted end as `halted`, but a
halted turn does
not say which of the two (or an archive) stopped it, so they are not counted here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.engine.pause import PREEMPTED
from scheduler.store.models import Session, Turn

DAY = timedelta(hours=24)
MARKS = 500  # per kind: the newest, so a busy day cannot make the page heavy


@dataclass(frozen=True)
class Mark:
    kind: str  # start | pause | preemption
    at: datetime
    session_id: int
    title: str
    detail: str = ""  # the turn's kind, the pause's reason, or the lifetime preemption count


@dataclass(frozen=True)
class Timeline:
    since: datetime
    until: datetime
    marks: tuple[Mark, ...]

    def of(self, kind: str) -> list[Mark]:
        return [m for m in self.marks if m.kind == kind]

    def ticks(self, every: timedelta = timedelta(hours=3)) -> list[tuple[float, datetime]]:
        """The whole UTC hours in the span that are a multiple of `every`, with their offsets: the
        page labels its axis with clock times, as every other time it shows."""
        step = every.total_seconds()
        first = math.ceil(self.since.timestamp() / step) * step
        out = []
        at = datetime.fromtimestamp(first, tz=UTC)
        while at <= self.until:
            out.append((self.offset(at), at))
            at += every
        return out

    def offset(self, at: datetime) -> float:
        """Where `at` falls in the span, from 0 (its start) to 1 (now)."""
        span = (self.until - self.since).total_seconds()
        return min(max((at - self.since).total_seconds() / span, 0.0), 1.0) if span > 0 else 1.0


def last_day(db: DBSession, now: datetime, span: timedelta = DAY) -> Timeline:
    since = now - span
    starts = db.exec(
        select(Turn.started_at, Turn.session_id, Turn.kind, Session.title)
        .join(Session, col(Session.id) == col(Turn.session_id))
        .where(col(Turn.started_at) >= since, col(Turn.started_at) <= now)
        .order_by(col(Turn.started_at).desc())
        .limit(MARKS)
    )
    marks = [Mark("start", at, sid, title, kind) for at, sid, kind, title in starts if at is not None]
    paused = db.exec(
        select(Session.pause_at, Session.id, Session.pause_reason, Session.title)
        .where(col(Session.pause_at) >= since, col(Session.pause_at) <= now, col(Session.pause_reason) != PREEMPTED)
        .order_by(col(Session.pause_at).desc())
        .limit(MARKS)
    )
    marks += [
        Mark("pause", at, sid, title, reason or "")
        for at, sid, reason, title in paused
        if at is not None and sid is not None
    ]
    preempted = db.exec(
        select(Session.last_preempted_at, Session.id, Session.preemption_count, Session.title)
        .where(col(Session.last_preempted_at) >= since, col(Session.last_preempted_at) <= now)
        .order_by(col(Session.last_preempted_at).desc())
        .limit(MARKS)
    )
    marks += [
        Mark("preemption", at, sid, title, str(count))
        for at, sid, count, title in preempted
        if at is not None and sid is not None
    ]
    return Timeline(since=since, until=now, marks=tuple(sorted(marks, key=lambda m: m.at)))
