"""The ranked queue as plain rows for the templates: priority above, spot by precedence, each
waiting row with its place on the admission ladder ("#4 of 9 · 3 ahead", seed 000), its status,
a genesis · class pill, its precedence and its headline waiting reason (`scheduler.rules.waiting`).

The ladder (`bot.chat.ladder_view`) counts every waiting session in seed 000's capacity-aware
order, whatever the filter shows, so a row's position means the same in `queue spot` as in
`queue`: eligible waiters first, then the parked ones by blocker severity. A parked row is
marked — display context, not a status: it is still queued — and the heading counts them all;
inside a section the waiting rows follow the ladder. A claim that is not the default shows as a
badge: `c2` or `c1.5x` for its own budget, `w0.5` for its weight (`w0` for zero). Pacer's own
bookkeeping is on no list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.chat import ladder_view
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
    parked: bool = False  # on the ladder behind a blocker (display context: it is still queued)


@dataclass(frozen=True)
class QueueView:
    priority: list[QueueRow]
    spot: list[QueueRow]
    priority_total: int
    spot_total: int
    waiting_total: int  # the ladder's length
    scope: str  # what the filter showed, for the heading
    parked: int = 0  # the ladder's waiters a blocker holds now, shown or not
    ladder: ladder_view.Ladder | None = None  # the whole ladder, for a selected waiter's view

    @property
    def rows(self) -> list[QueueRow]:
        return [*self.priority, *self.spot]

    @property
    def not_shown(self) -> int:
        return self.priority_total + self.spot_total - len(self.priority) - len(self.spot)


def in_ladder_order(rows: list[QueueRow]) -> list[QueueRow]:
    """The rows of one section with its waiting rows in ladder order, each in a place a waiting
    row held: a running row stays where precedence put it."""
    waiting = iter(sorted((row for row in rows if row.position is not None), key=lambda row: row.position or 0))
    return [next(waiting) if row.position is not None else row for row in rows]


def class_totals(db: DBSession, policy: PolicyView, flt: QueueFilter) -> dict[str, int]:
    resolved = class_expr(policy)
    stmt = select(resolved, func.count()).where(
        col(Session.status).in_(list(flt.statuses)), col(Session.bookkeeping).is_(False)
    )
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
    ladder = ladder_view.read(db, policy, now)
    spent = spends_by(db, [s.id for s, _ in ranked if s.id is not None and s.cost_cap_usd is not None])
    priority: list[QueueRow] = []
    spot: list[QueueRow] = []
    for session, cls in ranked:
        assert session.id is not None
        place = ladder.position(session.id) if session.status == Status.WAITING.value else None
        rung = ladder.rung(session.id) if place is not None else None
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
            parked=rung is not None and rung.parked,
        )
        (priority if cls is SchedulingClass.PRIORITY else spot).append(row)
    totals = class_totals(db, policy, flt)
    scope = " ".join(
        filter(None, ["all" if every_status else "", scheduling_class or "", f"genesis:{genesis}" if genesis else ""])
    )
    return QueueView(
        priority=in_ladder_order(priority),
        spot=in_ladder_order(spot),
        priority_total=totals.get(SchedulingClass.PRIORITY.value, 0),
        spot_total=totals.get(SchedulingClass.SPOT.value, 0),
        waiting_total=ladder.total,
        scope=scope,
        parked=ladder.parked,
        ladder=ladder,
    )
