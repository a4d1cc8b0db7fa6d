"""The pause record and its one resume (seed 001, "What a pause does", "What brings it back",
"It joins the queue that already exists", "Joining the queue on purpose").

Three things put a session in this dormancy — the budget ceiling interrupting a turn, a
priority session taking its slot, a person parking it on purpose — and all three write the
same record (`paused_by = spot_quota`) and come back through the same function, `resume_paused`:
the ceiling sweep calls it, StartNow calls it, and a queue pass calls it for the one session the
scheduler interrupted that stands at the front of the queue (`first_paused`, `queue_pass._Pass.in_order`),
so that work arriving between sweeps does not take its room. One path, one decision (the resume
margin), one record: the seed's "exactly one resume owner" is kept in what it protects — no
mechanism has a resume rule or a park of its own — and each caller locks the row, skipping one
another transaction holds, and re-checks it is still paused before resuming it.

`paused_by = spot_quota` is what keeps the recovery paths out: the queue pass and the hold
ladder skip a session carrying a pause (`turns._candidates`, `turns._is_due_candidate`), and
start-up recovery never resumes one (`lifecycle.recover` only repairs turns and first starts).

A preemption mark is this record with the reason PREEMPTED and a stamp (the preemption module
makes it); it is released here, since both the ceiling sweep's pass over the marks and crash
recovery release one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from sqlalchemy import case
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.engine.admit import admit
from scheduler.engine.attempt import Submission, TurnAttempt, Work
from scheduler.engine.fleet import asking_for, build_snapshot
from scheduler.engine.records import STOPPED, clear_pause, last_turn, replay, stopped_turn
from scheduler.engine.verdict import verdict
from scheduler.rules.gate import RESUME_MARGIN_PCT, Decision, decide
from scheduler.rules.genesis import SchedulingClass
from scheduler.rules.snapshot import PolicyView
from scheduler.store import preemption_ledger
from scheduler.store.db import core
from scheduler.store.models import EnqueuedMessage, Session, Status
from scheduler.store.policy import load_policy
from scheduler.store.sessions import class_defaults, class_expr_for, class_from
from templates import render

log = logging.getLogger("pacer.pause")

PAUSED_BY = "spot_quota"  # neither user (stops auto-continues) nor recovery (would resume it)
AT_UTILIZATION_LIMIT = "at_utilization_limit"
PREEMPTED = "preempted_by_priority"
USER_SPOT_QUEUE = "user_spot_queue"
INTERRUPTED = frozenset({AT_UTILIZATION_LIMIT, PREEMPTED})  # pauses the scheduler made, not a person
# A session preempted within this is not eligible again (seed 001, "Thrash is bounded by a
# cooldown"); a queue pass still resumes it into a freed slot (`first_paused`).
COOLDOWN = timedelta(minutes=30)
PAUSE_REASONS = (AT_UTILIZATION_LIMIT, PREEMPTED, USER_SPOT_QUEUE)


@dataclass(frozen=True)
class Resume:
    """What one resume attempt did. `decision` is the one taken against the widened reserve."""

    submission: Submission
    decision: Decision | None = None

    @property
    def started(self) -> bool:
        return self.submission.outcome == "started"


def record_pause(session: Session, reason: str, detail: str, now: datetime, *, costs: bool) -> None:
    """Write the pause record. `costs`: a turn was (or will be) interrupted, so the pause is
    counted; a deliberate park of an idle session costs nothing and is not."""
    session.pause_reason = reason
    session.pause_at = now
    session.pause_detail = detail
    session.paused_by = PAUSED_BY
    if costs:
        session.pause_count += 1
    session.updated_at = now


def is_standing(session: Session) -> bool:
    """A mark that still means something: stamped, and the pause it wrote still in place."""
    return session.preempt_mark_at is not None and session.pause_reason == PREEMPTED


def release_mark(db: DBSession, session: Session, *, uncharge: bool) -> None:
    """Take a preemption mark off `session` and clear the pause it wrote; `uncharge`: the
    preemption never happened, so the ledger and the counts give it back; else the mark is
    taken, and the cooldown counts from it."""
    if uncharge:
        preemption_ledger.uncharge(db, session)
        session.preemption_count = max(session.preemption_count - 1, 0)
        session.pause_count = max(session.pause_count - 1, 0)
    else:
        session.last_preempted_at = session.preempt_mark_at
    session.preempt_mark_at = None
    session.preempted_by_id = None
    clear_pause(session)


def release_after_crash(db: DBSession, session: Session) -> bool:
    """A crash ended the marked turn before its end could sleep it: every turn in flight was
    lost with it, so the slot the mark promised is free and the preemption never happened.
    The mark is released and un-charged, and the session goes back through the gate like any
    interrupted turn. Returns whether there was a mark to release."""
    if not is_standing(session):
        return False
    release_mark(db, session, uncharge=True)
    session.pending_sleep = False
    return True


def is_dormant_paused(session: Session) -> bool:
    return (
        session.status == Status.WAITING.value and session.pause_reason is not None and session.paused_by == PAUSED_BY
    )


PAUSED_LOOKAHEAD = 8  # paused rows read to find the front spot one past priority and asleep ones


@dataclass(frozen=True)
class Dormant:
    """What the ceiling sweep needs to sort a paused session: a few columns, its class resolved
    as `class_of` resolves it. The whole row is read only for a session the sweep will try to
    resume."""

    id: int
    spot: bool
    precedence: int
    created_at: datetime
    wake_at: datetime | None
    reason: str
    preempted_at: datetime | None  # the preemption cooldown's ledger (`Session.last_preempted_at`)
    runtime: str
    weight: float = 1.0  # its claim on the slot budget, asked again on resume
    capacity: int | None = None
    capacity_multiplier: float | None = None

    def is_spot(self, _policy: PolicyView | None = None) -> bool:
        return self.spot


def first_paused(db: DBSession, policy: PolicyView, now: datetime) -> Dormant | None:
    """The spot session the scheduler interrupted (the ceiling, or a priority session taking its
    slot) that is next in the sweep's resume order: a queue pass offers it the room before held
    spot work ranked below it (`queue_pass.queue_pass`). Not a priority sleeper (the sweep resumes those
    whatever the windows say), not one asleep on a wake, not one a person parked into the spot
    queue (it waits there, as asked). A preemption victim inside its cooldown is offered the room
    too: its resume condition is a free slot inside the budget (seed 001, "It joins the queue that
    already exists"), and the cooldown keeps any priority follow-up from taking it again."""
    for dormant in dormant_paused(db, policy, PAUSED_LOOKAHEAD):
        asleep = dormant.wake_at is not None and dormant.wake_at > now
        if not dormant.spot or asleep or dormant.reason not in INTERRUPTED:
            continue
        return dormant
    return None


def dormant_paused(db: DBSession, policy: PolicyView, limit: int) -> list[Dormant]:
    """The sweep's population in resume order: priority first (a promoted sleeper is resumed
    whatever the windows say), then highest precedence, then the oldest pause."""
    return [
        Dormant(
            int(sid),
            class_from(own, genesis, policy) is SchedulingClass.SPOT,
            int(precedence),
            created_at,
            wake_at,
            str(reason),
            preempted_at,
            str(runtime),
            float(weight),
            capacity,
            multiplier,
        )
        for sid, own, genesis, precedence, created_at, wake_at, reason, preempted_at, runtime, weight, capacity,
        multiplier in core(
            db, _dormant_stmt(class_defaults(policy), limit)
        )
    ]


@lru_cache(maxsize=16)
def _dormant_stmt(defaults: tuple[SchedulingClass, ...], limit: int) -> Any:
    """Built once per set of class defaults: every ceiling sweep runs it."""
    resolved = class_expr_for(defaults)
    return (
        sa_select(
            col(Session.id), col(Session.scheduling_class), col(Session.genesis), col(Session.precedence),
            col(Session.created_at), col(Session.wake_at), col(Session.pause_reason), col(Session.last_preempted_at),
            col(Session.runtime), col(Session.weight), col(Session.capacity), col(Session.capacity_multiplier),
        )
        .where(
            col(Session.status) == Status.WAITING.value,
            col(Session.pause_reason).is_not(None),
            col(Session.paused_by) == PAUSED_BY,
            col(Session.preempt_mark_at).is_(None),  # a standing mark is resolved first
        )
        .order_by(
            case((resolved == SchedulingClass.PRIORITY.value, 0), else_=1),
            col(Session.precedence).desc(),
            col(Session.pause_at).asc(),
            col(Session.id).asc(),
        )
        .limit(limit)
    )


def next_queued(db: DBSession, session_id: int) -> EnqueuedMessage | None:
    return db.exec(
        select(EnqueuedMessage)
        .where(EnqueuedMessage.session_id == session_id, col(EnqueuedMessage.delivered_at).is_(None))
        .order_by(col(EnqueuedMessage.id))
    ).first()


def _resume_turn(db: DBSession, session: Session, now: datetime) -> TurnAttempt:
    """The turn a resume delivers. A held turn that never ran goes first (one turn, never a
    second job; the park's own prompt waits behind it). So does a turn cut off before the agent
    named a conversation (`records.stopped_turn`): there is nothing for a nudge to resume, and
    the task itself must run. Otherwise the park's prompt, in place of the nudge. An interrupted
    turn gets the nudge — the agent lost a tool call and has to pick up. A session that finished
    its turn and has a message waiting gets that message: a nudge in front of it would only
    spend a turn saying nothing."""
    sid = session.id or 0
    held = session.hold_reason is not None and session.hold_prompt is not None
    first = replay(db, session) if held else stopped_turn(db, session)
    if first is not None:
        if session.pause_resume_prompt:
            db.add(EnqueuedMessage(session_id=sid, prompt=session.pause_resume_prompt, kind="resume", created_at=now))
        return first
    if session.pause_resume_prompt:
        return TurnAttempt(session.pause_resume_prompt, [], "resume")
    previous = last_turn(db, sid)
    interrupted = previous is not None and previous.status in STOPPED
    if not interrupted:
        queued = next_queued(db, sid)
        if queued is not None:
            queued.delivered_at = now
            db.add(queued)
            return TurnAttempt(queued.prompt, queued.attachments, queued.kind)
    return TurnAttempt(render("text/pause_resume_nudge.j2", reason=session.pause_reason), [], "resume")


def resume_paused(work: Work, session: Session, *, margin: float = RESUME_MARGIN_PCT) -> Resume:
    """The one resume of a paused or parked session, for the sweep and for StartNow alike.

    Decided against a reserve widened by `margin`: holding a session that never started costs
    nothing, resuming one that was interrupted costs a lost tool call if it is pushed straight
    back over. A refusal leaves the pause exactly as it was — its owner stays the sweep, and no
    hold ladder is started for it. A wake still ahead is the session's next event: refused.
    """
    db, now = work.db, work.now
    sid = session.id or 0

    def gate() -> Decision:
        policy = load_policy(db)
        snapshot = build_snapshot(db, work.ctx, policy, work.reading)
        return decide(snapshot, asking_for(session, work.ctx, policy, running=False), now, reserve_margin_pct=margin)

    said = verdict(work, session, gate, wake=True)
    decision = said.decision
    if decision is None or decision.held:
        held = said.hold_block(now)
        return Resume(Submission("held", sid, reason=held.reason, sentence=held.sentence, decision=decision), decision)
    if session.preempt_mark_at is not None:
        # A mark is resolved by the turn ending; resuming the session settles it as taken.
        session.last_preempted_at = session.preempt_mark_at
        session.preempt_mark_at = None
    reason = session.pause_reason
    attempt = _resume_turn(db, session, now)
    clear_pause(session)
    session.status = Status.WAITING.value
    db.add(session)
    db.flush()
    sub = admit(work, session, attempt)
    if sub.outcome == "started":
        work.effects.notice("resumed", session_id=sid, reason=reason)
        log.info("session #%s resumed from its %s pause", sid, reason, extra={"reason": reason})
    return Resume(sub, decision)
