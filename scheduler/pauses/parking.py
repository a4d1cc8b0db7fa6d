"""Joining the spot queue on purpose (seed 001, "Joining the queue on purpose").

`pause_into_spot_queue` is the answer to "this session should wait, and no time I could name is
the right one": it writes the same pause record as the budget ceiling and hands the session to
the same sweep, with no wake-up and no wall-clock time. Three differences, because nothing
interrupted it: the reason is `user_spot_queue`; a session that resolves to priority is set to
spot (the sweep resumes a non-spot sleeper on its very next pass); and a resume prompt may ride
on it, delivered when the sweep reaches it in place of the nudge. Its place in line is the
precedence it already has. A wake armed earlier is cancelled: picking the queue after picking a
time means "not then, this instead".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from scheduler.context import Context
from scheduler.engine.attempt import Work
from scheduler.engine.effects import Effects
from scheduler.engine.pause import PREEMPTED, USER_SPOT_QUEUE, record_pause
from scheduler.engine.records import halt_turn, lock, running_turn, wake_job_id
from scheduler.errors import InvalidInput, Refused
from scheduler.rules.genesis import SchedulingClass
from scheduler.rules.waiting import banner
from scheduler.store.db import session_scope
from scheduler.store.models import Status
from scheduler.store.policy import load_policy
from scheduler.store.ranking import change_class
from scheduler.store.sessions import class_of
from templates import error_text, render

log = logging.getLogger("pacer.parking")

MAX_RESUME_PROMPT_CHARS = 100_000


@dataclass(frozen=True)
class Parked:
    session_id: int
    was_priority: bool
    running: bool  # a turn was running: it ends first (or was halted)
    halted: bool
    cancelled_wake: datetime | None
    sentence: str


def _validated_prompt(resume_prompt: str | None) -> str | None:
    if resume_prompt is None:
        return None
    if not isinstance(resume_prompt, str) or not resume_prompt.strip():
        raise InvalidInput(error_text("parking/prompt_missing"), field="resume_prompt")
    if len(resume_prompt) > MAX_RESUME_PROMPT_CHARS:
        raise InvalidInput(
            error_text("parking/prompt_too_long", length=len(resume_prompt), limit=MAX_RESUME_PROMPT_CHARS),
            field="resume_prompt",
        )
    return resume_prompt


def pause_into_spot_queue(
    ctx: Context, session_id: int, *, resume_prompt: str | None = None, halt: bool = False
) -> Parked:
    """Park a session in the spot queue. A running turn finishes first and the session sleeps at
    its end; `halt=True` stops the turn where it stands instead (and that pause is counted)."""
    prompt = _validated_prompt(resume_prompt)
    if not isinstance(halt, bool):
        raise InvalidInput(error_text("parking/halt_not_bool", halt=halt), field="halt")
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        session = lock(db, session_id)
        if session.status == Status.ARCHIVED.value:
            raise Refused(error_text("parking/archived", session_id=session_id))
        policy = load_policy(db)
        was_priority = class_of(session, policy) is not SchedulingClass.SPOT
        if was_priority:
            change_class(db, session, SchedulingClass.SPOT.value, now=now)
        cancelled = session.wake_at
        if cancelled is not None:
            # cancel_wake's effect, inside the park's own transaction: a wake firing between two
            # transactions would start the session and consume the park on its way past.
            session.wake_at = None
            session.wake_prompt = None
            effects.cancel(wake_job_id(session_id))
        if session.preempt_mark_at is not None and session.pause_reason == PREEMPTED:
            # A person's park supersedes a standing mark: the preemption never happened.
            session.preemption_count = max(session.preemption_count - 1, 0)
            session.pause_count = max(session.pause_count - 1, 0)
        session.preempt_mark_at = None
        turn = running_turn(db, session_id)
        detail = render("text/parked.j2", session=session, was_priority=was_priority, running=turn is not None,
                        halted=halt, cancelled_wake=None, resume_prompt=prompt is not None)
        record_pause(session, USER_SPOT_QUEUE, detail, now, costs=turn is not None and halt)
        session.pause_resume_prompt = prompt
        if turn is not None:
            session.pending_sleep = True  # its own turn end carries it to waiting
            if halt:
                halt_turn(Work(db, ctx, now, effects), turn)
        else:
            session.pending_sleep = False
            session.status = Status.WAITING.value
        db.add(session)
        db.flush()
        sentence = render("text/parked.j2", session=session, was_priority=was_priority, running=turn is not None,
                          halted=halt, cancelled_wake=cancelled, resume_prompt=prompt is not None)
        effects.notice(
            "paused", session_id=session_id, reason=USER_SPOT_QUEUE, sentence=banner(session, now), title=session.title
        )
        log.info("session #%s parked in the spot queue: %s", session_id, sentence)
        result = Parked(session_id, was_priority, turn is not None, halt and turn is not None, cancelled, sentence)
    effects.apply(ctx)
    return result
