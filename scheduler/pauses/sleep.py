"""Sleep: `wake_me_up_later` and the wake (seed 001, "A pause outranks precedence").

A session paused until a time it has not reached does not start, whatever its precedence and
class: the queue pass skips it, its re-check stands down, StartNow refuses it. Past that time it
is an ordinary candidate again, and its wake delivers a prompt like any other turn — gated.
"""

from __future__ import annotations

from datetime import datetime

from scheduler import alarms
from scheduler.context import Context
from scheduler.engine.effects import Effects
from scheduler.engine.queue_pass import recheck
from scheduler.engine.records import is_running, lock, wake_job_id
from scheduler.engine.turns import submit_turn
from scheduler.errors import InvalidInput, Refused
from scheduler.store.db import session_scope
from scheduler.store.models import EnqueuedMessage, Status
from templates import error_text

DEFAULT_WAKE_PROMPT = "It is the time you asked to be woken at: continue."


def wake_me_up_later(ctx: Context, session_id: int, at: datetime, prompt: str | None = None) -> datetime:
    now = ctx.clock.now()
    if at.tzinfo is None:
        raise InvalidInput(error_text("sleep/at_naive"), field="at")
    if at <= now:
        raise InvalidInput(error_text("sleep/at_past", at=at), field="at")
    effects = Effects()
    with session_scope(ctx.engine) as db:
        session = lock(db, session_id)
        if session.status in (Status.ARCHIVED.value, Status.DONE.value, Status.FAILED.value):
            raise Refused(error_text("sleep/cannot_sleep", session_id=session_id, status=session.status))
        session.wake_at = at
        session.wake_prompt = prompt or DEFAULT_WAKE_PROMPT
        if is_running(db, session_id):
            session.pending_sleep = True  # the turn ends first, then it sleeps
        else:
            session.status = Status.WAITING.value
        session.updated_at = now
        db.add(session)
        effects.alarm(wake_job_id(session_id), at, alarms.WAKE, session_id)
    effects.apply(ctx)
    return at


def wake(ctx: Context, session_id: int) -> None:
    """The wake is the session's next event: it carries its own prompt, through the gate."""
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        session = lock(db, session_id)
        if session.wake_at is None or session.wake_at > now:
            return  # cancelled, or re-armed for later
        if session.status == Status.ARCHIVED.value:
            return
        prompt = session.wake_prompt or DEFAULT_WAKE_PROMPT
        session.wake_at = None
        session.wake_prompt = None
        db.add(session)
        held = session.hold_reason is not None
        if held:  # the held turn goes first; the wake's prompt is delivered after it
            db.add(EnqueuedMessage(session_id=session_id, prompt=prompt, kind="wake", created_at=now))
    if held:
        recheck(ctx, session_id)  # its re-check stood down while it slept: ask again now
    else:
        submit_turn(ctx, session_id, prompt, kind="wake")


def cancel_wake(ctx: Context, session_id: int) -> bool:
    with session_scope(ctx.engine) as db:
        session = lock(db, session_id)
        had = session.wake_at is not None
        session.wake_at = None
        session.wake_prompt = None
        db.add(session)
    ctx.cancel_alarm(wake_job_id(session_id))
    return had
