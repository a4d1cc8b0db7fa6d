"""Where a session stands in the queue: precedence set or dropped between two neighbours, a
class changed by hand or by its trigger (seed 001's three clauses), and the ranked queue itself.
Thin over the database; the rules are the pure functions in `genesis` and `precedence`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, or_
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler import bounds
from scheduler.errors import InvalidInput
from scheduler.rules import precedence as prec
from scheduler.rules.genesis import SchedulingClass, parse_class, parse_genesis
from scheduler.rules.snapshot import PolicyView
from scheduler.store.models import Session, Status, Trigger
from scheduler.store.policy import load_policy
from scheduler.store.sessions import class_expr, class_of, get_session, top_of_spot
from templates import error_text


def set_precedence(db: DBSession, session: Session, value: int | str, *, now: datetime) -> int:
    policy = load_policy(db)
    if value == prec.TOP_OF_SPOT:
        session.precedence = top_of_spot(db, policy, session)
    elif isinstance(value, int):
        session.precedence = bounds.check_int(value, "precedence", -bounds.MAX_PRECEDENCE, bounds.MAX_PRECEDENCE)
    else:
        raise InvalidInput(error_text("sessions/precedence_kind", value=value), field="precedence")
    session.updated_at = now
    db.add(session)
    db.flush()
    return session.precedence


def reorder_between(
    db: DBSession, session: Session, upper_id: int | None, lower_id: int | None, *, now: datetime
) -> prec.Reorder:
    """Drop `session` between two neighbours (ids), nudging them apart when they are adjacent."""
    upper = get_session(db, upper_id) if upper_id is not None else None
    lower = get_session(db, lower_id) if lower_id is not None else None
    if session.id in {upper_id, lower_id}:
        raise InvalidInput(error_text("sessions/beside_itself"), field="between")
    result = prec.between(upper.precedence if upper else None, lower.precedence if lower else None)
    if upper is not None and result.upper_neighbour is not None:
        upper.precedence = result.upper_neighbour
        db.add(upper)
    if lower is not None and result.lower_neighbour is not None:
        lower.precedence = result.lower_neighbour
        db.add(lower)
    session.precedence = result.value
    session.updated_at = now
    db.add(session)
    db.flush()
    return result


def change_class(
    db: DBSession, session: Session, new_class: str | None, *, now: datetime, place: str | None = None
) -> tuple[SchedulingClass, SchedulingClass]:
    """A per-session choice; returns (before, after). A hand move stops the trigger stamp."""
    policy = load_policy(db)
    before = class_of(session, policy)
    cls = parse_class(new_class)
    if place is not None:
        prec.resolve_placement(precedence=None, place=place)
    session.scheduling_class = cls.value if cls else None
    session.class_from_trigger = False
    if place == prec.TOP_OF_SPOT:
        session.precedence = top_of_spot(db, policy, session)
    session.updated_at = now
    db.add(session)
    db.flush()
    return before, class_of(session, policy)


@dataclass(frozen=True)
class Reclassification:
    rewritten: int  # rows whose stamp was rewritten
    moved: int  # rows whose resolved class actually changed
    promoted_ids: tuple[int, ...]  # rows now priority that were spot: released by the caller


def change_trigger_class(db: DBSession, trigger: Trigger, new_class: str | None, *, now: datetime) -> Reclassification:
    """Seed 001's three clauses: this trigger's sessions only, still waiting only, still carrying
    the class the trigger stamped. Reports how many moved between classes."""
    policy = load_policy(db)
    cls = parse_class(new_class)
    old_stamp = trigger.scheduling_class
    trigger.scheduling_class = cls.value if cls else None
    db.add(trigger)
    stmt = select(Session).where(
        Session.trigger_id == trigger.id,
        Session.status == Status.WAITING.value,
        or_(
            col(Session.class_from_trigger).is_(True),
            # A trigger that stamped "Default" left NULL; those rows derive and move too.
            col(Session.scheduling_class).is_(None),
        ),
    )
    rewritten = moved = 0
    promoted: list[int] = []
    for session in db.exec(stmt):
        if session.scheduling_class != old_stamp:
            continue  # moved by hand: a per-session choice outranks a trigger-wide one
        before = class_of(session, policy)
        session.scheduling_class = cls.value if cls else None
        session.class_from_trigger = cls is not None
        session.updated_at = now
        db.add(session)
        rewritten += 1
        after = class_of(session, policy)
        if after is not before:
            moved += 1
            if after is SchedulingClass.PRIORITY and session.id is not None:
                promoted.append(session.id)
    db.flush()
    return Reclassification(rewritten, moved, tuple(promoted))


@dataclass(frozen=True)
class QueueFilter:
    statuses: Sequence[str] = (
        Status.WAITING.value,
        Status.RUNNING.value,
        Status.NEEDS_INPUT.value,
        Status.FAILED.value,
    )
    scheduling_class: str | None = None
    genesis: str | None = None
    limit: int | None = None


def queue_order(resolved: ColumnElement[str]) -> tuple[Any, ...]:
    """The queue's total order as SQL: priority above spot, higher precedence first, oldest
    first within a tie, and the id last so no two rows compare equal (`precedence.rank_key`)."""
    return (
        case((resolved == SchedulingClass.PRIORITY.value, 0), else_=1),
        col(Session.precedence).desc(),
        col(Session.created_at).asc(),
        col(Session.id).asc(),
    )


def ranked_queue(
    db: DBSession, policy: PolicyView, flt: QueueFilter = QueueFilter()
) -> list[tuple[Session, SchedulingClass]]:
    """Priority above; spot by precedence, oldest first within a tie; the id breaks every tie.
    Pacer's own bookkeeping is on no list a person reads (seed 001)."""
    resolved = class_expr(policy)
    stmt = select(Session, resolved).where(
        col(Session.status).in_(list(flt.statuses)), col(Session.bookkeeping).is_(False)
    )
    if flt.scheduling_class:
        stmt = stmt.where(resolved == parse_class(flt.scheduling_class, field="class"))
    if flt.genesis:
        stmt = stmt.where(Session.genesis == parse_genesis(flt.genesis).value)
    stmt = stmt.order_by(*queue_order(resolved))
    if flt.limit:
        stmt = stmt.limit(flt.limit)
    return [(row, SchedulingClass(cls)) for row, cls in db.exec(stmt)]
