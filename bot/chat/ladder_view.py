"""Seed 000's QUEUE ladder as the surfaces read it: every waiting session in capacity-aware order
(`scheduler.rules.queue_ladder.order`: eligible first, then parked by blocker severity, admission
order kept inside each group), and the bounded ladder of one selected waiter (`why`, the App
Home's row, the live page).

One read of the waiting rows' few columns the order needs, in admission order; each waiter's
headline reason is `waiting_reason`'s, without its sentences. Pacer's own bookkeeping is left out,
as from every list a person reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy import and_, case, or_
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.front import (
    SPOT_GATE_REASONS,
    PolicyView,
    SchedulingClass,
    Session,
    Status,
    class_expr,
    queue_ladder,
    queue_order,
    waiting_reason,
)

# The stamps `waiting_reason` ranks a record by, read only for the few waiters with more than a
# hold on it (a pause, a park, a wake).
STAMPS = ("id", "hold_reason", "hold_at", "hold_retry_at", "pause_reason", "pause_at", "park_reason", "park_at",
          "wake_at")
MIXED = -1  # the database's answer for a record `waiting_reason` must rank


@dataclass(frozen=True)
class Entry:
    """One entry of a selected waiter's bounded ladder, as the templates show it."""

    place: int
    id: int
    title: str
    parked: bool
    group: str  # eligible | capacity | budget | prerequisite | hold
    badges: tuple[str, ...]
    selected: bool


@dataclass
class Ladder:
    rungs: list[queue_ladder.Rung]  # in ladder order
    index: dict[int, int] = field(init=False)

    def __post_init__(self) -> None:
        self.index = {rung.id: i for i, rung in enumerate(self.rungs)}

    @property
    def total(self) -> int:
        return len(self.rungs)

    @property
    def parked(self) -> int:
        return sum(rung.parked for rung in self.rungs)

    def position(self, session_id: int) -> int | None:
        """1-based place on the ladder, None when the session is not waiting on it."""
        found = self.index.get(session_id)
        return None if found is None else found + 1

    def rung(self, session_id: int) -> queue_ladder.Rung | None:
        place = self.position(session_id)
        return None if place is None else self.rungs[place - 1]


def read(db: DBSession, policy: PolicyView, now: datetime) -> Ladder:
    """Every waiter in ladder order. The database says each one's group from its hold alone (the
    common case, so ten thousand waiters cost one indexed sort and two integers a row here); a
    record with more on it is ranked by `waiting_reason`, as `why` says it."""
    resolved = class_expr(policy)
    stmt = (
        sa_select(col(Session.id), _group(resolved))
        .where(col(Session.status) == Status.WAITING.value, col(Session.bookkeeping).is_(False))
        .order_by(*queue_order(resolved))
    )
    rows = [(int(sid), int(group)) for sid, group in db.connection().execute(stmt)]
    mixed = _mixed(db, policy, [sid for sid, group in rows if group == MIXED], now)
    rungs = [queue_ladder.Rung(sid, mixed[sid] if group == MIXED else group) for sid, group in rows]
    return Ladder(queue_ladder.order(rungs))


def _group(resolved: Any) -> Any:
    """`queue_ladder.severity` of a record that holds a hold at most, as SQL; MIXED for any other."""
    hold = col(Session.hold_reason)
    named = [(hold == reason, group) for reason, group in queue_ladder.SEVERITY.items()]
    return case(
        (or_(col(Session.pause_reason).is_not(None), col(Session.park_reason).is_not(None),
             col(Session.wake_at).is_not(None)), MIXED),
        (hold.is_(None), queue_ladder.ELIGIBLE),
        # a spot gate's hold on a session promoted since is a fossil: the class wins
        (and_(resolved != SchedulingClass.SPOT.value, hold.in_(sorted(SPOT_GATE_REASONS))), queue_ladder.ELIGIBLE),
        *named,
        else_=queue_ladder.HOLD,
    )


def _mixed(db: DBSession, policy: PolicyView, ids: list[int], now: datetime) -> dict[int, int]:
    """The group of each waiter with more than a hold on its record: `waiting_reason`'s headline."""
    if not ids:
        return {}
    resolved = class_expr(policy)
    stmt = sa_select(*[getattr(Session, name) for name in STAMPS], resolved).where(col(Session.id).in_(ids))
    found = {}
    for values in db.connection().execute(stmt):
        row = SimpleNamespace(**dict(zip(STAMPS, values[:-1], strict=True)))
        spot = values[-1] == SchedulingClass.SPOT.value
        headline = waiting_reason(row, now, spot=spot, sentences=False).headline
        found[int(row.id)] = queue_ladder.severity(headline.reason if headline is not None else None)
    return found


def _badges(session: Any) -> tuple[str, ...]:
    return queue_ladder.badges(capacity=session.capacity, multiplier=session.capacity_multiplier,
                               precedence=session.precedence, weight=session.weight)


@dataclass(frozen=True)
class Selected:
    """The bounded ladder of one waiter: its place, how many are ahead, the heading's parked count
    and the entries shown, with the gaps between them as counts."""

    session_id: int
    position: int
    total: int
    parked: int
    steps: list[Entry | int]  # an int is a gap: that many entries not shown

    @property
    def ahead(self) -> int:
        return self.position - 1


def selected(db: DBSession, ladder: Ladder, session_id: int) -> Selected | None:
    """`session_id`'s bounded ladder, None when it is not waiting on the ladder."""
    place = ladder.position(session_id)
    if place is None:
        return None
    shown = queue_ladder.around(ladder.rungs, place - 1)
    ids = [step.entry.id for step in shown if isinstance(step, queue_ladder.Step)]
    rows = {row.id: row for row in db.exec(select(Session).where(col(Session.id).in_(ids)))}
    steps: list[Entry | int] = []
    for step in shown:
        if isinstance(step, queue_ladder.Gap):
            steps.append(step.count)
            continue
        rung, row = step.entry, rows[step.entry.id]
        steps.append(Entry(step.place, rung.id, row.title, rung.parked, rung.group, _badges(row), step.selected))
    return Selected(session_id, place, ladder.total, ladder.parked, steps)
