"""The ranked queue as plain rows for the templates: priority above, spot by precedence, each
waiting row with its place on the admission ladder ("#4 of 9 · 3 ahead", seed 000), its status,
a genesis · class pill, its precedence and its headline waiting reason (`scheduler.rules.waiting`).

The ladder counts every waiting session in admission order, whatever the filter shows, so a
row's position means the same in `queue spot` as in `queue`. As seed 000's ladder does, a row
waiting on capacity (its own budget or the fleet's slots) is marked parked — display context,
not a status: it is still queued — and the heading counts them; a claim that is not the default
shows as a badge: `c2` or `c1.5x` for its own budget, `w0.5` for its weight (`w0` for zero).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.front import (
    Mechanism,
    PolicyView,
    QueueFilter,
    SchedulingClass,
    Session,
    Status,
    class_expr,
    ranked_queue,
    spends_by,
    waiting_reason,
)

EVERY_STATUS = tuple(s.value for s in Status)
PARKED_REASONS = frozenset({"capacity", "fleet_at_cap"})


def badges(session: Session) -> tuple[str, ...]:
    """Seed 000's cN and wN: only what differs from the default claim."""
    found: list[str] = []
    if session.capacity is not None:
        found.append(f"c{session.capacity}")
    elif session.capacity_multiplier is not None:
        found.append(f"c{session.capacity_multiplier:g}x")
    if session.weight != 1.0:
        found.append(f"w{session.weight:g}")
    return tuple(found)


@dataclass(frozen=True)
class QueueRow:
    id: int
    title: str
    status: str
    genesis: str
    scheduling_class: str
    precedence: int
    requester: str | None
    position: int | None  # on the ladder, 1-based; None when the row is not waiting
    ahead: int | None
    record: Mechanism | None  # the headline waiting reason, for a waiting row
    badges: tuple[str, ...] = ()  # a claim that is not the default: c2, c1.5x, w0.5
    cost_cap: float | None = None  # its cost cap, shown with what it has spent
    spent: float = 0.0

    @property
    def parked(self) -> bool:
        """Waiting on capacity: its own budget, or every slot taken."""
        return self.record is not None and self.record.kind == "hold" and self.record.reason in PARKED_REASONS


@dataclass(frozen=True)
class QueueView:
    priority: list[QueueRow]
    spot: list[QueueRow]
    priority_total: int
    spot_total: int
    waiting_total: int  # the ladder's length
    scope: str  # what the filter showed, for the heading

    @property
    def rows(self) -> list[QueueRow]:
        return [*self.priority, *self.spot]

    @property
    def parked(self) -> int:
        return sum(row.parked for row in self.rows)

    @property
    def not_shown(self) -> int:
        return self.priority_total + self.spot_total - len(self.priority) - len(self.spot)


def ladder(db: DBSession, policy: PolicyView, ids: Sequence[int] | None = None) -> dict[int, int]:
    """Session id -> 1-based position among every waiting session, in the order `ranked_queue`
    uses. The database numbers the rows (a window function) and returns only those asked for,
    so ten thousand waiters cost one sort inside the database, not ten thousand rows here."""
    resolved = class_expr(policy)
    place = func.row_number().over(
        order_by=(
            case((resolved == SchedulingClass.PRIORITY.value, 0), else_=1),
            col(Session.precedence).desc(),
            col(Session.created_at).asc(),
            col(Session.id).asc(),
        )
    )
    numbered = (
        select(col(Session.id).label("sid"), place.label("place"))
        .where(Session.status == Status.WAITING.value)
        .subquery()
    )
    stmt = select(numbered.c.sid, numbered.c.place)
    if ids is not None:
        stmt = stmt.where(numbered.c.sid.in_(list(ids)))
    return {int(sid): int(n) for sid, n in db.exec(stmt)}


def waiting_by_class(db: DBSession, policy: PolicyView) -> dict[str, int]:
    resolved = class_expr(policy)
    stmt = select(resolved, func.count()).where(Session.status == Status.WAITING.value).group_by(resolved)
    return {str(cls): int(n) for cls, n in db.exec(stmt)}


def places_of(
    db: DBSession, policy: PolicyView, flt: QueueFilter, shown_waiting: list[int], waiting: dict[str, int]
) -> dict[int, int]:
    """Ladder positions of the waiting rows shown. Without a genesis filter the rows shown are a
    prefix of the ranked order, so the waiting ones are the ladder's first entries — after every
    priority waiter when only spot is shown — and no ladder query is needed."""
    if flt.genesis:
        return ladder(db, policy, shown_waiting)
    offset = waiting.get(SchedulingClass.PRIORITY.value, 0) if flt.scheduling_class == SchedulingClass.SPOT.value else 0
    return {sid: offset + n for n, sid in enumerate(shown_waiting, start=1)}


def class_totals(db: DBSession, policy: PolicyView, flt: QueueFilter) -> dict[str, int]:
    resolved = class_expr(policy)
    stmt = select(resolved, func.count()).where(col(Session.status).in_(list(flt.statuses)))
    if flt.scheduling_class:
        stmt = stmt.where(resolved == flt.scheduling_class)
    if flt.genesis:
        stmt = stmt.where(Session.genesis == flt.genesis)
    return {str(cls): int(n) for cls, n in db.exec(stmt.group_by(resolved))}


def build(
    db: DBSession,
    policy: PolicyView,
    *,
    scheduling_class: str | None,
    genesis: str | None,
    every_status: bool,
    limit: int,
    now: datetime,
    statuses: Sequence[str] | None = None,
) -> QueueView:
    """`statuses`, when given, are the rows shown (the live page: the open ones); else every status
    or the queue's own (waiting, running, needs input, failed)."""
    flt = QueueFilter(
        statuses=statuses or (EVERY_STATUS if every_status else QueueFilter.statuses),
        scheduling_class=scheduling_class,
        genesis=genesis,
        limit=limit,
    )
    ranked = ranked_queue(db, policy, flt)
    waiting = waiting_by_class(db, policy)
    shown_waiting = [s.id for s, _ in ranked if s.id is not None and s.status == Status.WAITING.value]
    places = places_of(db, policy, flt, shown_waiting, waiting)
    spent = spends_by(db, [s.id for s, _ in ranked if s.id is not None and s.cost_cap_usd is not None])
    priority: list[QueueRow] = []
    spot: list[QueueRow] = []
    for session, cls in ranked:
        assert session.id is not None
        place = places.get(session.id)
        row = QueueRow(
            id=session.id,
            title=session.title,
            status=session.status,
            genesis=session.genesis,
            scheduling_class=cls.value,
            precedence=session.precedence,
            requester=session.requester,
            position=place,
            ahead=None if place is None else place - 1,
            record=waiting_reason(session, now, spot=cls is SchedulingClass.SPOT).headline
            if session.status == Status.WAITING.value
            else None,
            badges=badges(session),
            cost_cap=session.cost_cap_usd,
            spent=spent.get(session.id, 0.0),
        )
        (priority if cls is SchedulingClass.PRIORITY else spot).append(row)
    totals = class_totals(db, policy, flt)
    scope = " ".join(
        filter(None, ["all" if every_status else "", scheduling_class or "", f"genesis:{genesis}" if genesis else ""])
    )
    return QueueView(
        priority=priority,
        spot=spot,
        priority_total=totals.get(SchedulingClass.PRIORITY.value, 0),
        spot_total=totals.get(SchedulingClass.SPOT.value, 0),
        waiting_total=sum(waiting.values()),
        scope=scope,
    )
