"""The one entry point every turn comes through: a first start, a follow-up, a wake, a poll, a restart,
a person's message (seed 001, "Every turn is gated, not just the first").

    submit_turn(ctx, session_id, prompt, attachments, kind=...)  -> Submission

A turn that arrives while another is running, held or paused waits in the session's durable
queue instead of racing it; otherwise it is admitted at its place in the queue
(`queue_pass.admit_in_queue`), which starts it or holds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from scheduler.attempt import PASS_THROUGH, TURN_KINDS, Submission, TurnAttempt, Work
from scheduler.context import Context
from scheduler.db import session_scope
from scheduler.errors import InvalidInput, Refused
from scheduler.fleet import read_quota
from scheduler.log_context import about_session
from scheduler.models import EnqueuedMessage, Session, Status
from scheduler.policy import load_policy
from scheduler.queue_pass import admit_in_queue
from scheduler.records import is_asleep, is_running, lock, wake_job_id
from templates import error_text

TAKES_OVER = frozenset({"follow_up", "human", "restart"})  # addressed to the session by someone


def _waits_behind(session: Session, kind: str, busy: bool, now: datetime) -> str | None:
    """Why a new turn waits in the session's queue instead of being admitted, or None."""
    if busy:
        return "busy"
    if session.hold_reason is not None:
        return "behind_held_turn"
    if session.pause_reason is not None and kind != "wake":
        return "paused"  # a wake that came due is the one other way in (seed 001, "A pause outranks precedence")
    if is_asleep(session, now) and kind not in TAKES_OVER:
        return "asleep"
    return None


def submit_turn(
    ctx: Context, session_id: int, prompt: str, attachments: Sequence[Mapping[str, Any]] = (), *, kind: str = "first",
) -> Submission:
    """The one entry point every turn comes through: first start, follow-up, wake, poll, restart."""
    with about_session(session_id):
        if kind not in TURN_KINDS:
            raise InvalidInput(error_text("turns/kind_unknown", kind=kind, kinds=sorted(TURN_KINDS)), field="kind")
        now = ctx.clock.now()
        reading = read_quota(ctx, now)
        with session_scope(ctx.engine) as db:
            work = Work(db, ctx, now, reading=reading)
            # Every admission reads the policy: as the transaction's first read, the store versions
            # it is kept by need no savepoint (`store.read_or_fail_open`): two round trips fewer.
            load_policy(db)
            session = lock(db, session_id)
            if session.status == Status.ARCHIVED.value:
                raise Refused(error_text("turns/archived", session_id=session_id))
            waits = None if kind in PASS_THROUGH else _waits_behind(session, kind, is_running(db, session_id), now)
            if waits is not None:
                # Two jobs racing one session would drop one prompt: the later one waits in the
                # durable queue and is delivered after the turn ahead of it. A paused session's
                # pause has one resume owner (seed 001), which delivers it; a wake still ahead is
                # the session's next event. The hold, the pause and the wake are left alone.
                db.add(EnqueuedMessage(session_id=session_id, prompt=prompt, attachments=[dict(a) for a in attachments], kind=kind, created_at=now))
                result = Submission("queued", session_id, reason=waits)
                work.effects.queue_pass = waits == "paused"  # the queue pass resumes the front paused session, margin and all
            else:
                if kind in TAKES_OVER and session.status in (Status.BLOCKED.value, Status.FAILED.value):
                    session.consecutive_failures = 0  # someone took a stopped session up again: six fresh attempts
                if is_asleep(session, now):  # a person taking the session over consumes its wake
                    session.wake_at = None
                    session.wake_prompt = None
                    work.effects.cancel(wake_job_id(session_id))
                result = admit_in_queue(work, session, TurnAttempt(prompt, attachments, kind))
        work.effects.apply(ctx)
        return result
