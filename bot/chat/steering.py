"""The commands that steer the queue without the turn engine: promote, demote and rank. Each is
a thin shell over `scheduler.store.sessions`: load, call the rule, report what moved. A refusal
raises, and `bot.chat.answers` rolls the transaction back, so a refused command changes nothing.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, or_
from sqlmodel import col, select

from bot.chat import ladder_view
from bot.chat.context import Answer, StoreContext
from bot.commands import command as c
from scheduler.errors import InvalidInput, Refused
from scheduler.front import (
    TOP_OF_SPOT,
    PolicyView,
    QueueFilter,
    Session,
    Status,
    change_class,
    class_expr,
    class_of,
    get_session,
    load_policy,
    reorder_between,
    session_view,
    set_precedence,
    spent_by,
)
from templates import error_text

ARCHIVABLE = (Status.WAITING.value, Status.NEEDS_INPUT.value, Status.FAILED.value)
FINISHED = (Status.DONE.value, Status.ARCHIVED.value)


def _plain(ctx: StoreContext, session: Session) -> dict[str, Any]:
    return session_view(session, load_policy(ctx.db), spent_by(ctx.db, session.id or 0))


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
        reordered=True,
    )


def demote(ctx: StoreContext, command: c.Demote) -> Answer:
    session = get_session(ctx.db, command.session_id)
    _open(session, "demoted")
    if session.scheduling_class == "spot" and not command.top:
        return Answer("demoted", {"session": _plain(ctx, session), "changed": False, "top": False, "before": "spot"})
    place = TOP_OF_SPOT if command.top else None
    before, _after = change_class(ctx.db, session, "spot", now=ctx.now, place=place)
    return Answer(
        "demoted",
        {"session": _plain(ctx, session), "changed": True, "top": command.top, "before": before.value},
        reordered=True,
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
        set_precedence(ctx.db, session, TOP_OF_SPOT, now=ctx.now)
    else:
        upper, lower = _neighbours(ctx, session, command)
        result = reorder_between(ctx.db, session, upper.id if upper else None, lower.id if lower else None, now=ctx.now)
        for row, value in ((upper, result.upper_neighbour), (lower, result.lower_neighbour)):
            if row is not None and row.id is not None and value is not None:
                nudged.append((row.id, value))
    place = ladder_view.read(ctx.db, load_policy(ctx.db), ctx.now).position(command.session_id)
    return Answer(
        "ranked",
        {"session": _plain(ctx, session), "before": before, "nudged": nudged, "position": place},
        reordered=session.precedence != before or bool(nudged),  # what ranked.j2 calls "nothing changed" is not
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
            error_text(
                "steering/not_in_spot_queue",
                place=command.place,
                target_id=target_id,
                status=target.status,
                scheduling_class=scheduling_class,
            ),
            field=command.place,
        )
    if command.place == "above":
        return _adjacent(ctx, policy, target, session, ahead=True), target
    return target, _adjacent(ctx, policy, target, session, ahead=False)


def _adjacent(
    ctx: StoreContext, policy: PolicyView, target: Session, moving: Session, *, ahead: bool
) -> Session | None:
    """The spot-queue row just ahead of (or just behind) `target`, leaving out the row being
    moved: one indexed query rather than the whole queue."""
    prec_, created, ident = col(Session.precedence), col(Session.created_at), col(Session.id)
    if ahead:
        beyond = or_(
            prec_ > target.precedence,
            and_(
                prec_ == target.precedence,
                or_(created < target.created_at, and_(created == target.created_at, ident < target.id)),
            ),
        )
        order = (prec_.asc(), created.desc(), ident.desc())
    else:
        beyond = or_(
            prec_ < target.precedence,
            and_(
                prec_ == target.precedence,
                or_(created > target.created_at, and_(created == target.created_at, ident > target.id)),
            ),
        )
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
