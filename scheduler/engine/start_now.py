"""StartNow (seed 001, "Starting a queued session now"): the one operation behind Start now and
every promotion. A waiting session is dormant in one of a few shapes, each with its own way back:

  held by the gate          its own held turn is asked again now — one turn, never a second job;
                            a still-spot session may be held again, and the answer says so
  paused / parked           the pause's own resume, with the prompt left with the park
  never run                 a fresh first turn from the session's recorded prompt
  ran before, nothing queued  stranded: the continue nudge
Refused: a session asleep on a wake it has not reached, one whose queue cannot be read, and a done
one with nothing queued — a reply continues it, with the person's words as its next turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import col, func, select

from scheduler.context import Context
from scheduler.engine.admit import admit
from scheduler.engine.attempt import Submission, TurnAttempt, Work, manual_start
from scheduler.engine.fleet import read_quota
from scheduler.engine.pause import resume_paused
from scheduler.engine.records import is_asleep, is_running, lock, replay
from scheduler.errors import Refused
from scheduler.store.db import deciding_scope
from scheduler.store.models import EnqueuedMessage, Status, Turn
from templates import error_text, render

STOPPED = (Status.BLOCKED.value, Status.FAILED.value)


@dataclass(frozen=True)
class StartNowResult:
    shape: str  # held | paused | never_run | stranded | running
    submission: Submission | None
    sentence: str


def start_now(ctx: Context, session_id: int, *, actor: str | None = None) -> StartNowResult:
    now = ctx.clock.now()
    reading = read_quota(ctx, now)
    # A person's press: it does not wait out a rate limit, a prerequisite or position order (seed 002).
    with manual_start(), deciding_scope(ctx.engine) as db:
        work = Work(db, ctx, now, reading=reading)
        session = lock(db, session_id)
        if session.status == Status.ARCHIVED.value:
            raise Refused(error_text("start_now/archived", session_id=session_id))
        if is_asleep(session, now):
            raise Refused(error_text("start_now/asleep", session_id=session_id, wake_at=session.wake_at))
        if session.status in STOPPED:
            session.consecutive_failures = 0  # a person starts it again: six fresh attempts (seed 002)
        if is_running(db, session_id):
            return StartNowResult(
                "running", None, render("text/start_now.j2", shape="running", session=session, sub=None)
            )
        try:
            queued = db.exec(
                select(func.count()).select_from(EnqueuedMessage).where(
                    EnqueuedMessage.session_id == session_id, col(EnqueuedMessage.delivered_at).is_(None)
                )
            ).one()
            ran_before = db.exec(select(func.count()).select_from(Turn).where(Turn.session_id == session_id)).one() > 0
        except SQLAlchemyError as exc:
            # An unreadable queue looks exactly like an empty one; starting on that would build
            # the second turn the whole design exists to avoid.
            raise Refused(
                error_text("start_now/queue_unreadable", session_id=session_id, error=type(exc).__name__)
            ) from exc
        if session.pause_reason is not None:
            # Before the hold: a paused session's hold is inert (the queue pass skips it), and
            # the pause's own resume replays the held turn itself — one way back, the sweep's.
            shape = "paused"
            sub = resume_paused(work, session).submission
        elif session.hold_reason is not None:
            attempt = replay(db, session)
            session.hold_count = 0  # a person asked for it directly: the ladder starts over
            shape = "held"
            sub = admit(work, session, attempt)
        elif not ran_before:
            shape = "never_run"
            sub = admit(
                work,
                session,
                TurnAttempt(session.prompt or render("text/continue_nudge.j2"), session.attachments, "first"),
            )
        elif session.status == Status.DONE.value and not queued:
            # Done is finished, not stranded: a nudge would spend quota on work nobody asked
            # for. Continuing it is a person's message (a reply), which says what to do next.
            raise Refused(error_text("start_now/done", session_id=session_id))
        elif queued:
            message = db.exec(
                select(EnqueuedMessage)
                .where(EnqueuedMessage.session_id == session_id, col(EnqueuedMessage.delivered_at).is_(None))
                .order_by(col(EnqueuedMessage.id))
            ).first()
            assert message is not None
            message.delivered_at = now
            db.add(message)
            shape = "queued_message"
            sub = admit(work, session, TurnAttempt(message.prompt, message.attachments, message.kind))
        else:
            shape = "stranded"
            sub = admit(work, session, TurnAttempt(render("text/continue_nudge.j2"), [], "nudge"))
        sentence = render("text/start_now.j2", shape=shape, session=session, sub=sub)
    work.effects.apply(ctx)
    return StartNowResult(shape, sub, sentence)
