"""The one entry point every turn comes through: a first start, a follow-up, a wake, a poll, a restart,
a person's message (seed 001, "Every turn is gated, not just the first").

    submit_turn(ctx, session_id, prompt, attachments, kind=...)  -> Submission

A turn that arrives while another is running, held or paused waits in the session's durable
queue instead of racing it; otherwise it is admitted at its place in the queue
(`queue_pass.admit_in_queue`), which starts it or holds it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, exists, or_
from sqlalchemy import select as sa_select

from scheduler.context import Context
from scheduler.engine.attempt import PASS_THROUGH, TURN_KINDS, Submission, TurnAttempt, Work
from scheduler.engine.fleet import read_quota
from scheduler.engine.queue_pass import admit_in_queue
from scheduler.engine.records import is_asleep, is_running, lock, wake_job_id
from scheduler.errors import InvalidInput, Refused
from scheduler.log_context import about_session
from scheduler.store.db import core, deciding_scope
from scheduler.store.models import EnqueuedMessage, Session, Status, Turn
from scheduler.store.policy import load_policy
from templates import error_text

log = logging.getLogger("pacer.turns")

TAKES_OVER = frozenset({"follow_up", "human", "restart"})  # addressed to the session by someone

_TURNS, _QUEUED = Turn.__table__, EnqueuedMessage.__table__  # type: ignore[attr-defined]
_HAS_TURN_OR_QUEUE = sa_select(or_(
    exists().where(_TURNS.c.session_id == bindparam("sid")), exists().where(_QUEUED.c.session_id == bindparam("sid")),
))


TO_RUNNING_AGENT = "to_running_agent"  # a human message handed to the agent of the turn running now
_LISTENING = sa_select(_TURNS.c.id).where(
    _TURNS.c.session_id == bindparam("sid"), _TURNS.c.status == "running", _TURNS.c.listening.is_(True)
).limit(1)


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
        _known(kind)
        now = ctx.clock.now()
        reading = read_quota(ctx, now)
        with deciding_scope(ctx.engine) as db:
            work = Work(db, ctx, now, reading=reading)
            # Every admission reads the policy: as the transaction's first read, the store versions
            # it is kept by need no savepoint (`caches.read_or_fail_open`): two round trips fewer.
            load_policy(db)
            result = _submit(work, session_id, prompt, attachments, kind)
        work.effects.apply(ctx)
        return result


def submit_turns(ctx: Context, turns: Sequence[tuple[int, str]], *, kind: str = "first") -> list[Submission | None]:
    """`submit_turn` for many sessions at once — a burst's first turns (a bulk relabel) — decided
    one after another, in session order, inside one transaction: one policy read, one commit, one
    application of their effects, where one at a time pays each of them per session. The
    decisions are the same ones, each seeing the starts decided before it.

    A session that is archived by now is refused (its Submission says so) and the rest go on.
    Any other failure rolls the whole batch back and each turn is submitted again alone, so one
    bad session costs the others nothing but time; what that session raises is logged, and its
    entry is None."""
    _known(kind)
    ordered = sorted(turns)  # rows locked in one order: two batches never wait on each other crosswise
    now = ctx.clock.now()
    reading = read_quota(ctx, now)
    try:
        with deciding_scope(ctx.engine) as db:
            work = Work(db, ctx, now, reading=reading)
            load_policy(db)
            results = {session_id: _submit_or_refuse(work, session_id, prompt, kind) for session_id, prompt in ordered}
    except Exception:
        log.exception("a batch of %d %s turns failed; each is submitted alone", len(ordered), kind)
        return [_alone(ctx, session_id, prompt, kind) for session_id, prompt in turns]
    work.effects.apply(ctx)
    return [results[session_id] for session_id, _prompt in turns]


def _known(kind: str) -> None:
    if kind not in TURN_KINDS:
        raise InvalidInput(error_text("turns/kind_unknown", kind=kind, kinds=sorted(TURN_KINDS)), field="kind")


def _submit_or_refuse(work: Work, session_id: int, prompt: str, kind: str) -> Submission:
    with about_session(session_id):
        try:
            return _submit(work, session_id, prompt, (), kind)
        except Refused as exc:  # the archived check, before anything of this session is written
            return _archived(session_id, exc)


def _alone(ctx: Context, session_id: int, prompt: str, kind: str) -> Submission | None:
    try:
        return submit_turn(ctx, session_id, prompt, kind=kind)
    except Refused as exc:
        return _archived(session_id, exc)
    except Exception:
        log.exception("the %s turn of session #%s could not be submitted", kind, session_id)
        return None


def _archived(session_id: int, refusal: Refused) -> Submission:
    return Submission("refused", session_id, reason="archived", sentence=str(refusal))


def _submit(
    work: Work, session_id: int, prompt: str, attachments: Sequence[Mapping[str, Any]], kind: str
) -> Submission:
    """One turn, inside the caller's transaction: queued behind the session's own work, or
    admitted at its place in the queue."""
    db, now = work.db, work.now
    session = lock(db, session_id)
    if session.status == Status.ARCHIVED.value:
        raise Refused(error_text("turns/archived", session_id=session_id))
    if kind == "first" and _begun(work, session):
        # Two askers can race for a session's first turn: the intake that made it (a webhook's
        # follow-up, maybe still waiting in its queue) and recovery at an election, which finds
        # it with no turn yet. The second finds it begun: queueing its copy would run it twice.
        return Submission(
            "refused",
            session_id,
            reason="first_turn_taken",
            sentence=error_text("turns/first_taken", session_id=session_id),
        )
    waits = None if kind in PASS_THROUGH else _waits_behind(session, kind, is_running(db, session_id), now)
    if waits is not None:
        # Two jobs racing one session would drop one prompt: the later one waits in the
        # durable queue and is delivered after the turn ahead of it. A paused session's
        # pause has one resume owner (seed 001), which delivers it; a wake still ahead is
        # the session's next event. The hold, the pause and the wake are left alone.
        db.add(
            EnqueuedMessage(
                session_id=session_id,
                prompt=prompt,
                attachments=[dict(a) for a in attachments],
                kind=kind,
                created_at=now,
            )
        )
        if waits == "paused":
            work.effects.queue_pass = True  # the queue pass resumes the front paused session, margin and all
        if waits == "busy" and kind == "human" and core(db, _LISTENING, {"sid": session_id}).first() is not None:
            # Its agent takes messages mid-turn: the runner hands it this one (`integrations.turn_inbox`),
            # and closing that inbox takes this session's lock too, so it is taken or it waits, never lost.
            return Submission("queued", session_id, reason=TO_RUNNING_AGENT)
        return Submission("queued", session_id, reason=waits)
    if kind in TAKES_OVER and session.status in (Status.BLOCKED.value, Status.FAILED.value):
        session.consecutive_failures = 0  # someone took a stopped session up again: six fresh attempts
    if is_asleep(session, now):  # a person taking the session over consumes its wake
        session.wake_at = None
        session.wake_prompt = None
        work.effects.cancel(wake_job_id(session_id))
    return admit_in_queue(work, session, TurnAttempt(prompt, attachments, kind))


def _begun(work: Work, session: Session) -> bool:
    """Whether the session has had its first turn asked already: started, held, paused, parked,
    asleep, or a turn or a queued prompt of its own (one indexed read)."""
    if session.started_at is not None or session.status != Status.WAITING.value:
        return True
    if any(v is not None for v in (session.hold_reason, session.pause_reason, session.park_reason, session.wake_at)):
        return True
    return bool(core(work.db, _HAS_TURN_OR_QUEUE, {"sid": session.id}).scalar())
