"""A human message jumps the queue (seed 001, "A human message jumps the queue", "The rank alone
is not enough", "The exchange, and why it refuses more often than it fires", "Where it runs").

"A human intervened" is a fact, not a guess: a HumanMessage row on this session, written only
for an established actor (a user on the roster) and only on the session spoken to — not its
parent, not the sessions under it. Creating a session is not intervening in one: the creation
surfaces place their session themselves and never call this.

On the request path the message is recorded and delivered as the session's next turn (behind a
held or running turn, never beside it). The re-ranking runs off it, as the alarm target
`promote_after_message`: the session goes to the instance form of top_of_spot and through
StartNow — it stays spot, so a full fleet or a spent budget holds it again — and one
less-involved dormant spot session goes to the bottom in exchange, so the numbers do not inflate
forever. A failure in the re-ranking is logged and swallowed: the message is already delivered.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler import alarms
from scheduler.context import Context
from scheduler.engine.records import lock
from scheduler.engine.start_now import start_now
from scheduler.engine.turns import TO_RUNNING_AGENT, submit_turn
from scheduler.errors import Forbidden, InvalidInput, NotFound, PacerError, Refused
from scheduler.rules.genesis import SchedulingClass
from scheduler.rules.precedence import SLOT_GAP, TOP_OF_SPOT
from scheduler.rules.snapshot import PolicyView
from scheduler.store.db import session_scope
from scheduler.store.models import ACTIVE_STATUSES, HumanMessage, Session, Status, Turn
from scheduler.store.policy import load_policy
from scheduler.store.ranking import set_precedence
from scheduler.store.sessions import class_expr, is_spot
from templates import error_text

log = logging.getLogger("pacer.promotion")

SURFACES = ("slack_thread", "github_comment", "console", "api")
ROLES = ("operator", "member")
STARVATION_EXEMPTION = timedelta(hours=24)
MAX_MESSAGE_CHARS = 100_000


def promotion_job_id(session_id: int) -> str:
    # One per session: a burst of replies is one re-rank, not one per line.
    return f"promote:{session_id}"


def is_rostered(actor: str, roster: bool | Mapping[str, str]) -> bool:
    if isinstance(roster, bool):
        return roster
    return roster.get(actor) in ROLES


def record_human_message(
    ctx: Context, session_id: int, actor: str, text: str, surface: str, *, roster: bool | Mapping[str, str],
) -> Spoken:
    """Record a person speaking to a session, deliver it as the session's next turn, and arm the
    re-ranking. `roster` is whether the actor is an established user: True/False from a caller
    that already resolved it, or the roster itself (user -> operator|member)."""
    if not isinstance(actor, str) or not actor.strip():
        raise InvalidInput(error_text("promotion/actor_missing"), field="actor")
    if surface not in SURFACES:
        raise InvalidInput(error_text("promotion/surface_unknown", surface=surface, surfaces=SURFACES), field="surface")
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(error_text("promotion/text_missing"), field="text")
    if len(text) > MAX_MESSAGE_CHARS:
        raise InvalidInput(
            error_text("promotion/text_too_long", length=len(text), limit=MAX_MESSAGE_CHARS), field="text"
        )
    if not is_rostered(actor, roster):
        raise Forbidden(error_text("promotion/not_rostered", session_id=session_id, actor=actor))
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        session = lock(db, session_id)
        if session.status == Status.ARCHIVED.value:
            raise Refused(error_text("promotion/archived", session_id=session_id))
        message = HumanMessage(session_id=session_id, actor=actor, surface=surface, text=text, created_at=now)
        db.add(message)
        db.flush()
    # Delivered before the re-rank, not after: a stranded session would otherwise get StartNow's
    # continue nudge in front of the person's words, and the message must survive a failed re-rank.
    submission = submit_turn(ctx, session_id, text, kind="human")
    ctx.schedule(promotion_job_id(session_id), now, alarms.PROMOTE_AFTER_MESSAGE, message.id)
    return Spoken(message, _delivery(submission.outcome, submission.reason))


@dataclass(frozen=True)
class Spoken:
    """A human message recorded, and where it went, for the answer its sender gets: "agent"
    (handed to the running agent mid-turn), "after_turn" (it waits for the running turn's end),
    or None (no turn ran: it is the session's next turn now)."""

    message: HumanMessage
    delivery: str | None

    def __getattr__(self, name: str) -> Any:  # the message's own fields: id, session_id, actor, text, ...
        return getattr(self.message, name)


def _delivery(outcome: str, reason: str | None) -> str | None:
    if outcome == "queued" and reason == TO_RUNNING_AGENT:
        return "agent"
    return "after_turn" if outcome == "queued" and reason == "busy" else None


@dataclass(frozen=True)
class Exchange:
    demoted_id: int | None
    refusal: str | None  # nobody_less_involved | starvation_exemption | already_at_bottom | None
    new_precedence: int | None = None


@dataclass(frozen=True)
class Promotion:
    session_id: int
    precedence: int | None = None  # None: not spot, nothing re-ranked
    start_shape: str | None = None
    exchange: Exchange | None = None
    error: str | None = None


def promote_after_message(ctx: Context, message_id: int) -> Promotion:
    """The alarm target. Never raises: the message is kept whatever happens here."""
    session_id = 0
    try:
        now = ctx.clock.now()
        with session_scope(ctx.engine) as db:
            message = db.get(HumanMessage, message_id)
            if message is None:
                raise NotFound(error_text("promotion/message_not_found", message_id=message_id))
            session_id = message.session_id
            session = lock(db, session_id)
            policy = load_policy(db)
            if session.status == Status.ARCHIVED.value or not is_spot(session, policy):
                return Promotion(session_id)  # priority work is not ordered by precedence at all
            precedence = set_precedence(db, session, TOP_OF_SPOT, now=now)
        shape: str | None
        try:
            shape = start_now(ctx, session_id).shape
        except PacerError as exc:  # asleep on its wake, or its queue unreadable: the rank stands
            log.info("session #%s was placed at the top of the spot queue but not started: %s", session_id, exc)
            shape = None
        exchange = exchange_after_promotion(ctx, session_id)
        return Promotion(session_id, precedence, shape, exchange)
    except Exception as exc:
        log.exception("re-ranking after human message #%s failed; the message itself is kept", message_id)
        return Promotion(session_id, error=f"{type(exc).__name__}: {exc}")


def _involvement(db: DBSession) -> tuple[dict[int, int], dict[int, datetime]]:
    rows = db.exec(
        select(HumanMessage.session_id, func.count(), func.max(HumanMessage.created_at)).group_by(
            col(HumanMessage.session_id)
        )
    ).all()
    counts = {int(sid): int(n) for sid, n, _last in rows}
    last = {int(sid): _aware(at) for sid, _n, at in rows if at is not None}
    return counts, last


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _spot_floor(db: DBSession, policy: PolicyView) -> int | None:
    return db.exec(
        select(func.min(Session.precedence)).where(
            class_expr(policy) == SchedulingClass.SPOT.value,
            col(Session.status).in_([s.value for s in ACTIVE_STATUSES]),
        )
    ).one()


def _dormant_spot_queue(db: DBSession, policy: PolicyView, excluding: int) -> list[Session]:
    """The queue itself: spot sessions dormant in waiting. A running session is not in it."""
    running = select(Turn.session_id).where(Turn.status == "running")
    return list(db.exec(
        select(Session).where(
            Session.status == Status.WAITING.value,
            class_expr(policy) == SchedulingClass.SPOT.value,
            col(Session.id) != excluding,
            col(Session.bookkeeping).is_(False),
            col(Session.id).not_in(running),
        )
    ))


def choose_demotion(
    promoted_count: int, candidates: list[Session], counts: dict[int, int], last: dict[int, datetime],
    floor: int | None, now: datetime,
) -> Exchange:
    """Pure: who goes to the bottom. Fewest human messages, then oldest last human message
    (never spoken to is oldest of all), then fewest prior demotions, then HIGHEST precedence (the
    one jumping the queue on nothing; the lowest is a no-op after one round), then newest."""
    less = [s for s in candidates if counts.get(s.id or 0, 0) < promoted_count]
    if not less:
        return Exchange(None, "nobody_less_involved")
    young = [s for s in less if now - s.created_at <= STARVATION_EXEMPTION]
    if not young:
        return Exchange(None, "starvation_exemption")
    never = datetime.min.replace(tzinfo=now.tzinfo)
    chosen = min(
        young,
        key=lambda s: (
            counts.get(s.id or 0, 0),
            last.get(s.id or 0, never),
            s.demotion_count,
            -s.precedence,
            -s.created_at.timestamp(),
            -(s.id or 0),
        ),
    )
    if floor is None or chosen.precedence <= floor:
        return Exchange(chosen.id, "already_at_bottom")
    return Exchange(chosen.id, None, floor - SLOT_GAP)


def exchange_after_promotion(ctx: Context, promoted_id: int) -> Exchange:
    """Demote one less-involved dormant spot session to the bottom, or nobody. The demoted
    session keeps its turn, its park record and its resume owner: only an integer changes."""
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        policy = load_policy(db)
        counts, last = _involvement(db)
        result = choose_demotion(
            counts.get(promoted_id, 0),
            _dormant_spot_queue(db, policy, promoted_id),
            counts,
            last,
            _spot_floor(db, policy),
            now,
        )
        if result.refusal is not None or result.demoted_id is None or result.new_precedence is None:
            log.info("exchange after promoting #%s demoted nobody: %s", promoted_id, result.refusal)
            return Exchange(None, result.refusal)
        demoted = lock(db, result.demoted_id)
        demoted.precedence = result.new_precedence
        demoted.demotion_count += 1
        demoted.updated_at = now
        db.add(demoted)
    log.info("exchange after promoting #%s: #%s demoted to %s", promoted_id, result.demoted_id, result.new_precedence)
    ctx.emit(
        "demoted_by_exchange", session_id=result.demoted_id, promoted_id=promoted_id, precedence=result.new_precedence
    )
    return result
