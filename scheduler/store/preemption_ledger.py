"""The preemption ledger: one `preemption_events` row per charged preemption, kept in step with
`Session.preemption_count` — written when the mark is made, deleted when the mark is released
un-charged, flagged when the mark halts the turn. What `scheduler.rules.cycling` reads, because the
per-session counter cannot say when a preemption happened nor who took the slot.

A session has at most one standing mark, so its newest row is always the standing mark's.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import aliased
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.rules.cycling import WINDOW, Cycling, Event, detect
from scheduler.store.models import PreemptionEvent, Session, Turn


def record(db: DBSession, victim: Session, by: Session, turn: Turn | None, now: datetime) -> None:
    db.add(PreemptionEvent(session_id=victim.id or 0, by_id=by.id, turn_id=turn.id if turn else None, at=now))


def _standing(db: DBSession, session_id: int) -> PreemptionEvent | None:
    stmt = (
        select(PreemptionEvent).where(PreemptionEvent.session_id == session_id).order_by(col(PreemptionEvent.id).desc())
    )
    return db.exec(stmt.limit(1)).first()


def uncharge(db: DBSession, session: Session) -> None:
    """The mark was released as never needed: it costs no recorded preemption."""
    row = _standing(db, session.id or 0)
    if row is not None:
        db.delete(row)


def halted(db: DBSession, session: Session) -> None:
    """The mark halted the session's turn: the turn's cost is what the preemption lost."""
    row = _standing(db, session.id or 0)
    if row is not None:
        row.halted = True
        db.add(row)


def events_since(db: DBSession, since: datetime) -> list[Event]:
    """The ledger from `since` on, with each halted turn's cost and both sessions' titles."""
    taker = aliased(Session)
    stmt = (
        select(PreemptionEvent, Session.title, taker.title, Turn.cost_usd)
        .join(Session, col(Session.id) == col(PreemptionEvent.session_id))
        .outerjoin(taker, col(taker.id) == col(PreemptionEvent.by_id))
        .outerjoin(Turn, col(Turn.id) == col(PreemptionEvent.turn_id))
        .where(col(PreemptionEvent.at) > since)
        .order_by(col(PreemptionEvent.at))
    )
    return [
        Event(
            session_id=row.session_id, by_id=row.by_id, at=row.at, halted=row.halted,
            cost_lost_usd=float(cost or 0.0) if row.halted else 0.0, title=title or "", by_title=by_title or "",
        )
        for row, title, by_title, cost in db.exec(stmt)
    ]


def cycling_now(db: DBSession, now: datetime) -> Cycling:
    """`cycling.detect` over the last WINDOW of the ledger: what every surface shows."""
    return detect(events_since(db, now - WINDOW), now)
