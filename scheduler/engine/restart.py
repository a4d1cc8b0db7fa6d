"""Restart from scratch (seed 001, "Consecutive holds back off"; "A pause outranks precedence").

A person asks for one session directly: its first prompt runs again as a new agent session (no
`--resume`), through the gate like any turn. Every door (`/pacer restart`, the console, REST
`POST /api/v1/sessions/{id}/restart`) runs this one function, so what a restart forgets is one
list, `RESTART_FROM_SCRATCH_KEYS`: the hold ladder, the failure count and the agent's session.
Without forgetting the ladder a restart would re-enter the gate looking exactly like one more
scheduled re-check and climb a rung, so someone who asked for the session now would wait longer
than if they had left it alone. Restarting resets the ladder; it does not bypass the gate: a
spot session the gate still refuses is held again, back at the first rung, and the answer says
so (making it priority is what starts it regardless).

Refused at the door, before anything changes: an archived session, one running a turn (the turn
would race its own restart), and one asleep on a wake it has not reached (the wake is its next
event; the doors refuse rather than consume it, as seed 001's table asks).

Nothing a person wrote is dropped: a held or paused turn that carried someone's words (not the
first prompt, not a nudge) waits in the session's queue, delivered after the restarted turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.context import Context
from scheduler.engine.admit import admit
from scheduler.engine.attempt import Submission, TurnAttempt, Work
from scheduler.engine.fleet import read_quota
from scheduler.engine.records import clear_hold, clear_pause, is_asleep, is_running, lock
from scheduler.errors import Refused
from scheduler.store.db import deciding_scope
from scheduler.store.models import EnqueuedMessage, Session, Status
from templates import error_text, render

# The columns a restart sets back to their defaults; everything else on the row carries forward.
RESTART_FROM_SCRATCH_KEYS: dict[str, object] = {
    "hold_count": 0,  # the ladder starts over at its first rung
    "consecutive_failures": 0,  # six fresh attempts (seed 002's retry budget)
    "agent_session_id": None,  # a new agent session: from scratch, not --resume
    "finished_at": None,
}
# Turn kinds that carry no one's words: restarting replaces them rather than queueing them.
NOT_WORDS = frozenset({"first", "nudge", "recovery", "poll"})


@dataclass(frozen=True)
class Restarted:
    submission: Submission
    kept: int  # held or paused prompts moved to the session's queue
    sentence: str


def restart_from_scratch(ctx: Context, session_id: int, *, actor: str | None = None) -> Restarted:
    now = ctx.clock.now()
    reading = read_quota(ctx, now)
    with deciding_scope(ctx.engine) as db:
        work = Work(db, ctx, now, reading=reading)
        session = lock(db, session_id)
        if session.status == Status.ARCHIVED.value:
            raise Refused(error_text("restart/archived", session_id=session_id))
        if is_asleep(session, now):
            raise Refused(error_text("restart/asleep", session_id=session_id, wake_at=session.wake_at))
        if is_running(db, session_id):
            raise Refused(error_text("restart/running", session_id=session_id))
        kept = _keep_words(work, session)
        clear_hold(session)
        clear_pause(session)
        for key, value in RESTART_FROM_SCRATCH_KEYS.items():
            setattr(session, key, value)
        session.status = Status.WAITING.value
        session.updated_at = now
        db.add(session)
        attempt = TurnAttempt(
            session.prompt or render("text/continue_nudge.j2"), list(session.attachments or []), "restart"
        )
        sub = admit(work, session, attempt)
        sentence = render("text/restarted.j2", session=session, sub=sub, kept=kept, actor=actor)
    work.effects.apply(ctx)
    return Restarted(sub, kept, sentence)


def _keep_words(work: Work, session: Session) -> int:
    """Queue the held and the paused prompt when they are someone's words, not the first prompt."""
    kept = 0
    held: tuple[str | None, str, list[dict[str, Any]]] = (
        session.hold_prompt, session.hold_turn_kind or "first", list(session.hold_attachments or [])
    )
    paused: tuple[str | None, str, list[dict[str, Any]]] = (session.pause_resume_prompt, "resume", [])
    for prompt, kind, attachments in (held, paused):
        if prompt and kind not in NOT_WORDS and prompt != session.prompt:
            work.db.add(EnqueuedMessage(
                session_id=session.id or 0, prompt=prompt, attachments=attachments, kind=kind, created_at=work.now
            ))
            kept += 1
    return kept
