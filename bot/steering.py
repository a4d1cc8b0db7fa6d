"""The commands that steer the queue without the turn engine: promote, demote, rank, archive,
policy set and the trigger settings. Each is a thin shell over `scheduler.sessions` /
`scheduler.policy`: load, call the rule, report what moved. A refusal raises, and `bot.chat`
rolls the transaction back, so a refused command changes nothing.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, or_, update
from sqlmodel import col, select

from bot import queue_view
from bot.commands import command as c
from bot.context import Answer, StoreContext
from scheduler import precedence as prec
from scheduler.errors import InvalidInput, Refused
from scheduler.models import Session, Status
from scheduler.policy import PolicyView, change_policy, ensure_policy, load_policy
from scheduler.session_view import session_view
from scheduler.sessions import (
    QueueFilter,
    change_class,
    change_trigger_class,
    class_expr,
    class_of,
    get_session,
    get_trigger,
    reorder_between,
    set_precedence,
)
from templates import error_text

ARCHIVABLE = (Status.WAITING.value, Status.NEEDS_INPUT.value, Status.FAILED.value)
FINISHED = (Status.DONE.value, Status.ARCHIVED.value)


def _plain(ctx: StoreContext, session: Session) -> dict[str, Any]:
    return session_view(session, load_policy(ctx.db))


def _open(session: Session, what: str) -> None:
    if session.status in FINISHED:
        raise Refused(error_text("steering/finished", session_id=session.id, status=session.status, what=what))


def promote(ctx: StoreContext, command: c.Promote) -> Answer:
    session = get_session(ctx.db, command.session_id)
    _open(session, "promoted")
    if session.scheduling_class == "priority":
        return Answer("promoted", {"session": _plain(ctx, session), "changed": False, "before": "priority"})
    before, _after = change_class(ctx.db, session, "priority", now=ctx.now)
    # Promotion removes the gate; start-now is what stops it waiting out a re-check (#423).
    start = (command.session_id,) if session.status == Status.WAITING.value else ()
    return Answer(
        "promoted",
        {"session": _plain(ctx, session), "changed": True, "before": before.value},
        start_now=start,
    )


def demote(ctx: StoreContext, command: c.Demote) -> Answer:
    session = get_session(ctx.db, command.session_id)
    _open(session, "demoted")
    if session.scheduling_class == "spot" and not command.top:
        return Answer("demoted", {"session": _plain(ctx, session), "changed": False, "top": False, "before": "spot"})
    place = prec.TOP_OF_SPOT if command.top else None
    before, _after = change_class(ctx.db, session, "spot", now=ctx.now, place=place)
    return Answer(
        "demoted",
        {"session": _plain(ctx, session), "changed": True, "top": command.top, "before": before.value},
    )


def rank(ctx: StoreContext, command: c.Rank) -> Answer:
    session = get_session(ctx.db, command.session_id)
    _open(session, "ranked")
    before = session.precedence
    nudged: list[tuple[int, int]] = []
    if command.place == "value":
        assert command.precedence is not None
        set_precedence(ctx.db, session, command.precedence, now=ctx.now)
    elif command.place == "top":
        set_precedence(ctx.db, session, prec.TOP_OF_SPOT, now=ctx.now)
    else:
        upper, lower = _neighbours(ctx, session, command)
        result = reorder_between(ctx.db, session, upper.id if upper else None, lower.id if lower else None, now=ctx.now)
        for row, value in ((upper, result.upper_neighbour), (lower, result.lower_neighbour)):
            if row is not None and row.id is not None and value is not None:
                nudged.append((row.id, value))
    place = queue_view.ladder(ctx.db, load_policy(ctx.db), [command.session_id]).get(command.session_id)
    return Answer(
        "ranked",
        {"session": _plain(ctx, session), "before": before, "nudged": nudged, "position": place},
    )


def _neighbours(ctx: StoreContext, session: Session, command: c.Rank) -> tuple[Session | None, Session | None]:
    """The two rows `session` is dropped between, read from the live spot queue."""
    if command.place == "between":
        first, second = (get_session(ctx.db, sid) for sid in command.neighbours)
        # The grammar takes the two in either order; the higher-ranked one is the upper.
        ordered = sorted((first, second), key=lambda s: (-s.precedence, s.created_at, s.id or 0))
        return ordered[0], ordered[1]
    target_id = command.neighbours[0]
    target = get_session(ctx.db, target_id)
    policy = load_policy(ctx.db)
    if target.status not in QueueFilter.statuses or class_of(target, policy).value != "spot":
        scheduling_class = class_of(target, policy).value
        raise InvalidInput(
            error_text("steering/not_in_spot_queue", place=command.place, target_id=target_id, status=target.status, scheduling_class=scheduling_class),
            field=command.place,
        )
    if command.place == "above":
        return _adjacent(ctx, policy, target, session, ahead=True), target
    return target, _adjacent(ctx, policy, target, session, ahead=False)


def _adjacent(ctx: StoreContext, policy: PolicyView, target: Session, moving: Session, *, ahead: bool) -> Session | None:
    """The spot-queue row just ahead of (or just behind) `target`, leaving out the row being
    moved: one indexed query rather than the whole queue."""
    prec_, created, ident = col(Session.precedence), col(Session.created_at), col(Session.id)
    if ahead:
        beyond = or_(prec_ > target.precedence, and_(prec_ == target.precedence, or_(created < target.created_at, and_(created == target.created_at, ident < target.id))))
        order = (prec_.asc(), created.desc(), ident.desc())
    else:
        beyond = or_(prec_ < target.precedence, and_(prec_ == target.precedence, or_(created > target.created_at, and_(created == target.created_at, ident > target.id))))
        order = (prec_.desc(), created.asc(), ident.asc())
    stmt = (
        select(Session)
        .where(
            class_expr(policy) == "spot",
            col(Session.status).in_(list(QueueFilter.statuses)),
            ident != moving.id,
            beyond,
        )
        .order_by(*order)
        .limit(1)
    )
    return ctx.db.exec(stmt).first()


def archive(ctx: StoreContext, command: c.Archive) -> Answer:
    session = get_session(ctx.db, command.session_id)
    # A conditional update, so a session that started meanwhile is not archived under it.
    moved = ctx.db.execute(
        update(Session)
        .where(col(Session.id) == command.session_id, col(Session.status).in_(ARCHIVABLE))
        .values(status=Status.ARCHIVED.value, updated_at=ctx.now)
    )
    if not moved.rowcount:  # type: ignore[attr-defined]
        raise Refused(error_text("steering/cannot_archive", session_id=command.session_id, status=session.status))
    ctx.db.refresh(session)
    return Answer("archived", {"session": _plain(ctx, session)})


def policy_set(ctx: StoreContext, command: c.PolicySet) -> Answer:
    changes: dict[str, Any] = dict(command.changes)
    if command.overrides:
        overrides = dict(ensure_policy(ctx.db).genesis_class_overrides or {})
        for genesis, cls in command.overrides:
            if cls is None:
                overrides.pop(genesis, None)
            else:
                overrides[genesis] = cls
        changes["genesis_class_overrides"] = overrides
    audit = change_policy(ctx.db, changes, surface=ctx.audit_surface, actor=ctx.actor, now=ctx.now)
    moved = [(key, _shown(old), _shown(new)) for key, (old, new) in (audit.changes if audit else {}).items()]
    return Answer("policy_set", {"moved": moved, "line": audit.line if audit else None}, in_channel=bool(moved))


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or "none"
    return str(value)


def trigger_class(ctx: StoreContext, command: c.TriggerClass) -> Answer:
    trigger = get_trigger(ctx.db, command.trigger_id)
    before = trigger.scheduling_class
    result = change_trigger_class(ctx.db, trigger, command.scheduling_class, now=ctx.now)
    return Answer(
        "trigger_class",
        {
            "trigger": {"id": trigger.id, "name": trigger.name},
            "before": before or "default",
            "after": command.scheduling_class or "default",
            "rewritten": result.rewritten,
            "moved": result.moved,
            "promoted": list(result.promoted_ids),
        },
        in_channel=result.moved > 0,
        start_now=result.promoted_ids,
    )


def trigger_precedence(ctx: StoreContext, command: c.TriggerPrecedence) -> Answer:
    trigger = get_trigger(ctx.db, command.trigger_id)
    before = trigger.precedence
    trigger.precedence = command.precedence
    ctx.db.add(trigger)
    ctx.db.flush()
    return Answer(
        "trigger_precedence",
        {"trigger": {"id": trigger.id, "name": trigger.name}, "before": before, "after": command.precedence},
    )
