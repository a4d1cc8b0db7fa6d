"""Queue holds (seed 002, "The holds"): the whole queue, or one concurrency group, stops admitting
for a named reason decided by a runner's outcome, and says so.

    reason           decided by                          scope    time shown          Resume
    rate_limit       the provider answered a rate limit  global   stated reset + 5m,  yes: runs the
                     (the turn goes back to the queue,            else 5m doubling    next session
                     no retry spent)                              to a 60m cap        without waiting
    auth             the stored credential was rejected  global   none                yes, and
                     (the turn goes back to the queue)                                unnecessary
    credits          the API key has no credit left      global   none                yes
                     (the session is blocked at once)
    model_access     the plan does not include the       global   none                yes; a turn of
                     chosen model (the turn goes back                             that runtime that
                     to the queue, no retry spent)                                succeeds lifts it
    retry_exhausted  six consecutive failures            group    none                yes
                     (the session is blocked)
    task_failed      an error a retry cannot fix (the    group    none                yes
                     session is failed), or a sixth
                     failure in a row to reach the
                     provider at all (it is blocked)
    prerequisite     every candidate waits on one        global   none                no: lifts when
                     (derived; `scheduler.holds.prerequisites`)                             the target ends
    blocked_         every candidate of a group overlaps group    none                no: lifts when
    interference     a blocked session's text (derived;                           the blocked one is
                     `scheduler.holds.interference`)                                    answered, retried
                                                                                  or closed
    cost_budget      a picked session's runtime spent    global   none                no: a spend reset
                     its budget (derived;                                         or a changed budget
                     `scheduler.holds.budgets`)                                         re-kicks the queue

Rate limits, auth, credits and the plan's models belong to the provider account every run shares, so they hold the
whole queue; a failed session holds its own concurrency group (the working tree it may have left
half-done), and nothing beyond itself when it has none (`scheduler.rules.failures`). One hold is in force per scope.
Every hold
gates admission only: running turns are never stopped by one. A hold announces itself once,
when it is new, and a change of reason counts as new. A hold whose "Resumes at" has passed has
lifted by itself: its alarm releases it and asks for a queue pass, and admission ignores it meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import or_
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler import alarms
from scheduler.context import Context
from scheduler.engine.attempt import Block, is_manual
from scheduler.engine.effects import Effects
from scheduler.errors import InvalidInput, Refused
from scheduler.store.db import session_scope
from scheduler.store.hold_reads import live_queue_holds, queue_holds_in_force
from scheduler.store.models import QueueHold, Session, Turn
from templates import error_text, render

log = logging.getLogger("pacer.queue_holds")

RATE_LIMIT, AUTH, CREDITS = "rate_limit", "auth", "credits"
RETRY_EXHAUSTED, TASK_FAILED, PREREQUISITE = "retry_exhausted", "task_failed", "prerequisite"
MODEL_ACCESS, BLOCKED_INTERFERENCE, COST_BUDGET = "model_access", "blocked_interference", "cost_budget"
REASONS = (
    RATE_LIMIT,
    AUTH,
    CREDITS,
    MODEL_ACCESS,
    RETRY_EXHAUSTED,
    TASK_FAILED,
    PREREQUISITE,
    BLOCKED_INTERFERENCE,
    COST_BUDGET,
)
# Resume appears only where pressing it can work: a prerequisite hold would re-apply at once.
RESUMABLE = frozenset({RATE_LIMIT, AUTH, CREDITS, MODEL_ACCESS, RETRY_EXHAUSTED, TASK_FAILED})
# Reported, not enforced: each session's own admission check holds it, so a newcomer that does
# not wait on a prerequisite, overlap blocked work or spend on a runtime over budget still starts.
DERIVED = frozenset({PREREQUISITE, BLOCKED_INTERFERENCE, COST_BUDGET})
RESUMED_BY = "resumed_by"  # in a hold's detail: the person whose Resume released it
BLOCK_REASON = "queue_hold"


def job_id(hold_id: int) -> str:
    return f"queue_hold:{hold_id}"


@dataclass(frozen=True)
class QueueHoldView:
    """A queue hold as every surface shows it: label, sentence, since, Resumes at, Resume."""

    id: int | None
    group: str | None  # None: the whole queue
    reason: str
    label: str
    sentence: str
    since: datetime
    resumes_at: datetime | None
    resume_offered: bool
    attempt: int = 1
    waiting: int = 0  # sessions it keeps waiting
    detail: dict[str, Any] = field(default_factory=dict)


def label_of(reason: str) -> str:
    return render("text/queue_hold_label.j2", reason=reason)


def view(hold: QueueHold, *, waiting: int = 0) -> QueueHoldView:
    return QueueHoldView(
        id=hold.id, group=hold.group, reason=hold.reason, label=label_of(hold.reason), sentence=hold.sentence,
        since=hold.since, resumes_at=hold.resumes_at, resume_offered=hold.reason in RESUMABLE,
        attempt=hold.attempt, waiting=waiting, detail=dict(hold.detail or {}),
    )


# --------------------------------------------------------------------------- the store


def in_force(db: DBSession, now: datetime) -> list[QueueHold]:
    """Holds gating admission now, read afresh: not released, and not past their own "Resumes at"."""
    return queue_holds_in_force(db, now)


def live_hold(db: DBSession, group: str | None, now: datetime) -> QueueHold | None:
    """The hold in force for one scope (None: the whole queue)."""
    scope = col(QueueHold.group).is_(None) if group is None else QueueHold.group == group
    stmt = (
        select(QueueHold)
        .where(
            scope,
            col(QueueHold.released_at).is_(None),
            or_(col(QueueHold.resumes_at).is_(None), col(QueueHold.resumes_at) > now),
        )
        .order_by(col(QueueHold.id).desc())
    )
    return db.exec(stmt).first()


def release(
    db: DBSession, hold: QueueHold, now: datetime, *, by: str, effects: Effects, kick_queue: bool = True
) -> None:
    hold.released_at = now
    hold.detail = {**(hold.detail or {}), "released_by": by}
    db.add(hold)
    db.flush()
    effects.cancel(job_id(hold.id or 0))
    effects.notice("queue_hold_lifted", hold=view(hold), by=by)
    effects.queue_pass = effects.queue_pass or kick_queue


@dataclass(frozen=True)
class NewHold:
    """A queue hold to put in force: its scope (None: the whole queue), reason and sentence,
    and when it lifts by itself."""

    group: str | None
    reason: str
    sentence: str
    resumes_at: datetime | None = None
    attempt: int = 1
    detail: dict[str, Any] = field(default_factory=dict)


def record(db: DBSession, effects: Effects, spec: NewHold, now: datetime) -> QueueHold:
    """Put a hold in force for a scope. The same reason again updates it quietly; a different
    reason replaces it and, like any new hold, announces itself once."""
    if spec.reason not in REASONS:
        raise InvalidInput(
            error_text("queue_holds/reason_unknown", reason=spec.reason, reasons=REASONS), field="reason"
        )
    current = live_hold(db, spec.group, now)
    if current is not None and current.reason == spec.reason:
        current.sentence = spec.sentence
        current.resumes_at = spec.resumes_at
        current.attempt = spec.attempt
        current.detail = {**(current.detail or {}), **spec.detail}
        db.add(current)
        db.flush()
        if spec.resumes_at is not None:
            effects.alarm(job_id(current.id or 0), spec.resumes_at, alarms.QUEUE_HOLD_DUE, current.id)
        return current
    if current is not None:
        release(
            db, current, now, by=f"replaced by {spec.reason}", effects=effects, kick_queue=False
        )  # still held, newly
    resumed = None if current is not None else resumed_into_refusal(db, spec)
    hold = QueueHold(
        group=spec.group, reason=spec.reason, sentence=spec.sentence, detail=dict(spec.detail), since=now,
        resumes_at=spec.resumes_at, attempt=spec.attempt, announced_at=resumed.announced_at if resumed else now,
    )
    db.add(hold)
    db.flush()
    if spec.resumes_at is not None:
        effects.alarm(job_id(hold.id or 0), spec.resumes_at, alarms.QUEUE_HOLD_DUE, hold.id)
    if resumed is not None:
        log.info("queue hold %s on %s is back after a Resume: the provider still refuses (announced once, at %s)",
                 spec.reason, spec.group or "the whole queue", resumed.announced_at)
        return hold
    effects.notice("queue_hold", hold=view(hold), resumable=spec.reason in RESUMABLE)
    log.warning("queue hold %s on %s: %s", spec.reason, spec.group or "the whole queue", spec.sentence,
                extra={"reason": spec.reason})
    return hold


def resumed_into_refusal(db: DBSession, spec: NewHold) -> QueueHold | None:
    """The scope's last hold, when this one is that hold again: a person resumed it (`resume_queue`),
    it had the same reason, and no turn has succeeded since — the provider still refuses, so it is
    not new and does not announce itself again (seed 002: once, when new; a change of reason
    counts as new). Lifted by its own time, or after a success in between, a hold is new."""
    scope = col(QueueHold.group).is_(None) if spec.group is None else col(QueueHold.group) == spec.group
    last = db.exec(select(QueueHold).where(scope).order_by(col(QueueHold.id).desc()).limit(1)).first()
    if (
        last is None
        or last.reason != spec.reason
        or last.released_at is None
        or not (last.detail or {}).get(RESUMED_BY)
    ):
        return None
    succeeded = db.exec(
        select(Turn.id).where(Turn.status == "done", col(Turn.finished_at) >= last.released_at).limit(1)
    ).first()
    return None if succeeded is not None else last


def due(ctx: Context, hold_id: int) -> None:
    """The "Resumes at" alarm: the hold lifts by itself and the queue looks again."""
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        hold = db.get(QueueHold, hold_id, with_for_update=True)
        if hold is None or hold.released_at is not None:
            return
        if hold.resumes_at is not None and hold.resumes_at > now:
            effects.alarm(job_id(hold_id), hold.resumes_at, alarms.QUEUE_HOLD_DUE, hold_id)  # extended since armed
        else:
            release(db, hold, now, by="its time passed", effects=effects)
    effects.apply(ctx)


def lift_expired(ctx: Context) -> list[int]:
    """Release holds whose "Resumes at" passed but whose alarm was lost (the sweep calls this)."""
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        stale = list(
            db.exec(select(QueueHold).where(col(QueueHold.released_at).is_(None), col(QueueHold.resumes_at) <= now))
        )
        for hold in stale:
            release(db, hold, now, by="its time passed", effects=effects)
    effects.apply(ctx)
    return [h.id or 0 for h in stale]


# --------------------------------------------------------------------------- Resume


@dataclass(frozen=True)
class ResumeResult:
    hold: QueueHoldView
    sentence: str


def resume_queue(ctx: Context, group: str | None = None, *, actor: str) -> ResumeResult:
    """Resume a held queue (`group` None: the whole queue). Refused where Resume cannot work."""
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        hold = live_hold(db, group, now)
        if hold is None:
            others = sorted({h.group or "the whole queue" for h in in_force(db, now)})
            if not others:
                raise Refused(error_text("queue_holds/nothing_held", group=group))
            raise Refused(error_text("queue_holds/held_elsewhere", group=group, others=others))
        if hold.reason == BLOCKED_INTERFERENCE:
            detail = hold.detail or {}
            named = list(zip(detail.get("blocked", []), detail.get("titles", []), strict=False))
            raise Refused(error_text("queue_holds/interference_hold", group=hold.group, blocked=named))
        if hold.reason == COST_BUDGET:
            raise Refused(
                error_text("queue_holds/cost_budget_hold", runtimes=sorted((hold.detail or {}).get("runtimes", {})))
            )
        if hold.reason not in RESUMABLE:
            raise Refused(error_text("queue_holds/prerequisite_hold", targets=(hold.detail or {}).get("targets", [])))
        hold.detail = {**(hold.detail or {}), RESUMED_BY: actor}
        release(db, hold, now, by=actor, effects=effects)
        result = ResumeResult(view(hold), render("text/queue_resumed.j2", hold=view(hold), actor=actor))
    effects.apply(ctx)
    log.warning("queue hold %s on %s resumed by %s", hold.reason, hold.group or "the whole queue", actor,
                extra={"reason": hold.reason})
    return result


def sign_in_verified(ctx: Context, *, actor: str = "a verified sign-in") -> int:
    """A new sign-in verified: the auth hold lifts and the queue resumes on its own (seed 002).
    The credential's owner (the quota/auth integration) calls this; returns holds lifted."""
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        holds = [h for h in in_force(db, now) if h.reason == AUTH]
        for hold in holds:
            release(db, hold, now, by=actor, effects=effects)
    effects.apply(ctx)
    return len(holds)


# --------------------------------------------------------------------------- admission


def admission_check(ctx: Context) -> Callable[[DBSession, Session, datetime], Block | None]:
    def queue_hold_check(db: DBSession, session: Session, now: datetime) -> Block | None:
        holds = live_queue_holds(db, now)
        for hold in holds:
            if hold.reason in DERIVED:
                continue  # each session's own check holds it
            if hold.group is not None and hold.group != session.concurrency_group:
                continue
            if hold.reason == RATE_LIMIT and is_manual():
                continue  # a person's press does not wait out a rate limit (seed 002)
            sentence = render("text/queue_hold_block.j2", hold=view(hold))
            return Block(BLOCK_REASON, sentence, retry_at=hold.resumes_at, skip_only=hold.group is not None)
        return None

    return queue_hold_check
