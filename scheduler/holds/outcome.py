"""The runner outcomes that become queue holds (seed 002, "The holds"): the `turn_finished` hook.

`scheduler.rules.failures.next_step` decides what an outcome does; this places the queue hold it names
and moves the session: a rate limit, a rejected credential and a model the plan does not include
send the turn back to the queue with no retry spent, exhausted credits block the session, and a session that failed (at
once, or
six times in a row) stops and holds its own concurrency group. A success also proves the
credential and the runtime's model, so it lifts an auth or model-access hold on its runtime.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.engine.attempt import Block, TurnAttempt, Work
from scheduler.engine.records import hold
from scheduler.holds.queue import (
    AUTH,
    BLOCK_REASON,
    CREDITS,
    MODEL_ACCESS,
    RATE_LIMIT,
    RETRY_EXHAUSTED,
    TASK_FAILED,
    NewHold,
    in_force,
    live_hold,
    record,
    release,
    view,
)
from scheduler.ports import Outcome, TurnResult
from scheduler.rules import failures, ladder
from scheduler.rules.failures import NextStep
from scheduler.store.hold_reads import any_queue_holds
from scheduler.store.models import QueueHold, Session, Status, Turn
from templates import render

log = logging.getLogger("pacer.queue_holds")

RESET_MARGIN = timedelta(minutes=5)  # past the provider's stated reset
CONSECUTIVE_WITHIN = timedelta(hours=1)  # a rate limit this soon after the last one doubles its wait

Handler = Callable[[Work, Session, Turn, TurnResult, NextStep], None]


def on_turn_finished(work: Work, session: Session, turn: Turn, result: TurnResult, step: NextStep) -> bool:
    """The `turn_finished` hook: the steps of `failures.next_step` that place a queue hold.
    Returns True when it took charge of the session's next state; a success, a halt and a retry
    stay with `completion.settle`. A success also proves the credential and the runtime's model:
    it lifts an auth or model-access hold."""
    if step.action == failures.SETTLE:
        _lift_proven(work, turn)
        return False
    handler = _HANDLERS.get(step.queue_hold or "")
    if handler is None:
        return False
    handler(work, session, turn, result, step)
    work.db.add(session)
    return True


PROVEN_BY_SUCCESS = frozenset({AUTH, MODEL_ACCESS})


def _lift_proven(work: Work, turn: Turn) -> None:
    """A turn that succeeded after an auth or model-access hold was placed reached the provider
    with the stored credential and the runtime's model: the hold lifts by itself, as its
    sentence says."""
    if not any_queue_holds(work.db):
        return
    for current in in_force(work.db, work.now):
        runtime = (current.detail or {}).get("runtime")
        if current.reason in PROVEN_BY_SUCCESS and runtime in (None, turn.runtime):
            proved = "authenticated" if current.reason == AUTH else "succeeded"
            release(work.db, current, work.now, by=f"a {turn.runtime} turn that {proved}", effects=work.effects)


def _archived(session: Session) -> bool:
    return session.status == Status.ARCHIVED.value


def _facts(session: Session, result: TurnResult) -> dict[str, Any]:
    return {
        "session_id": session.id,
        "title": session.title,
        "runtime": session.runtime,
        "error": (result.error or "")[:500],
    }


def _rate_limit_attempt(db: DBSession, current: QueueHold | None, now: datetime) -> int:
    """Consecutive rate limits double the wait: one that comes back within the hour after the
    last one lifted, with no successful turn in between, is the next step of the same ladder."""
    if current is not None and current.reason == RATE_LIMIT:
        return current.attempt  # several running turns hit by the same limit count once
    previous = db.exec(
        select(QueueHold)
        .where(col(QueueHold.group).is_(None), QueueHold.reason == RATE_LIMIT)
        .order_by(col(QueueHold.id).desc())
    ).first()
    if previous is None or previous.released_at is None or now - previous.released_at > CONSECUTIVE_WITHIN:
        return 1
    succeeded = db.exec(
        select(func.count())
        .select_from(Turn)
        .where(Turn.outcome == Outcome.SUCCESS.value, col(Turn.finished_at) > previous.released_at)
    ).one()
    return 1 if succeeded else previous.attempt + 1


def _rate_limited(work: Work, session: Session, turn: Turn, result: TurnResult, step: NextStep) -> None:
    db, now = work.db, work.now
    current = live_hold(db, None, now)
    attempt = _rate_limit_attempt(db, current, now)
    if result.rate_limit_reset_at is not None:
        resumes_at = result.rate_limit_reset_at + RESET_MARGIN
    else:
        resumes_at = now + ladder.rate_limit_delay(attempt)
    if current is not None and current.reason == RATE_LIMIT and current.resumes_at is not None:
        resumes_at = max(resumes_at, current.resumes_at)
    sentence = render("text/queue_hold_rate_limit.j2", **_facts(session, result))
    placed = record(
        db, work.effects, NewHold(None, RATE_LIMIT, sentence, resumes_at, attempt, _facts(session, result)), now
    )
    if _archived(session):
        return
    # Back to the queue with no retry spent: the failure count is left as it was.
    _requeue(work, session, turn, placed)


def _auth_rejected(work: Work, session: Session, turn: Turn, result: TurnResult, step: NextStep) -> None:
    sentence = render("text/queue_hold_auth.j2", **_facts(session, result))
    placed = record(work.db, work.effects, NewHold(None, AUTH, sentence, detail=_facts(session, result)), work.now)
    if _archived(session):
        return
    _requeue(work, session, turn, placed)


def _model_refused(work: Work, session: Session, turn: Turn, result: TurnResult, step: NextStep) -> None:
    facts = {**_facts(session, result), "model": result.extra.get("model")}
    sentence = render("text/queue_hold_model_access.j2", **facts)
    placed = record(work.db, work.effects, NewHold(None, MODEL_ACCESS, sentence, detail=facts), work.now)
    if _archived(session):
        return
    _requeue(work, session, turn, placed)


def _credits_exhausted(work: Work, session: Session, turn: Turn, result: TurnResult, step: NextStep) -> None:
    sentence = render("text/queue_hold_credits.j2", **_facts(session, result))
    record(work.db, work.effects, NewHold(None, CREDITS, sentence, detail=_facts(session, result)), work.now)
    if _archived(session):
        return
    _end(session, Status.BLOCKED, work.now)
    work.effects.notice(
        "failed", session_id=session.id, error=result.error, outcome=result.outcome.value, title=session.title
    )


def _retry_exhausted(work: Work, session: Session, turn: Turn, result: TurnResult, step: NextStep) -> None:
    if _archived(session):
        return
    _end(session, Status.BLOCKED, work.now)
    work.effects.notice("failed", session_id=session.id, error=result.error, retry_exhausted=True, title=session.title)
    facts = {**_facts(session, result), "group": session.concurrency_group, "failures": step.failures}
    _hold_own_queue(work, session, RETRY_EXHAUSTED, render("text/queue_hold_retry_exhausted.j2", **facts), facts)


def _task_failed(work: Work, session: Session, turn: Turn, result: TurnResult, step: NextStep) -> None:
    if _archived(session):
        return
    unreachable = result.outcome is Outcome.UNREACHABLE
    _end(session, Status.BLOCKED if unreachable else Status.FAILED, work.now)
    work.effects.notice(
        "failed", session_id=session.id, error=result.error, outcome=result.outcome.value, title=session.title
    )
    facts = {
        **_facts(session, result),
        "group": session.concurrency_group,
        "unreachable": unreachable,
        "failures": step.failures,
    }
    _hold_own_queue(work, session, TASK_FAILED, render("text/queue_hold_task_failed.j2", **facts), facts)


def _hold_own_queue(work: Work, session: Session, reason: str, sentence: str, facts: dict[str, Any]) -> None:
    """A failed session pauses its own queue — its concurrency group — and never unrelated work:
    a session in no group is stopped on its own and says so in its notice."""
    if session.concurrency_group is None:
        log.warning("session #%s stopped (%s): %s", session.id, reason, sentence, extra={"reason": reason})
        return
    record(work.db, work.effects, NewHold(session.concurrency_group, reason, sentence, detail=facts), work.now)


def _requeue(work: Work, session: Session, turn: Turn, placed: QueueHold) -> None:
    """The turn goes back to the queue, held by the queue hold like every session behind it."""
    session.status = Status.WAITING.value
    sentence = render("text/queue_hold_block.j2", hold=view(placed))
    hold(
        work,
        session,
        TurnAttempt(turn.prompt, turn.attachments, turn.kind),
        Block(BLOCK_REASON, sentence, placed.resumes_at),
    )


def _end(session: Session, status: Status, now: datetime) -> None:
    session.status = status.value
    session.finished_at = now
    session.updated_at = now


_HANDLERS: dict[str, Handler] = {
    RATE_LIMIT: _rate_limited,
    AUTH: _auth_rejected,
    CREDITS: _credits_exhausted,
    MODEL_ACCESS: _model_refused,
    RETRY_EXHAUSTED: _retry_exhausted,
    TASK_FAILED: _task_failed,
}
