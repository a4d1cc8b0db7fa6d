"""Completion: a worker reports a turn's result, and the session moves on — done, the next queued
message, a retry on its backoff, a pause's sleep, or what a queue hold decides (seed 002,
"The holds", through `scheduler.rules.failures`). A turn ending can free a slot, so it asks for a queue pass.
"""

from __future__ import annotations

from datetime import timedelta

from scheduler.context import Context
from scheduler.engine.attempt import Block, TurnAttempt, Work
from scheduler.engine.effects import Effects
from scheduler.engine.fleet import read_quota
from scheduler.engine.queue_pass import admit_in_queue
from scheduler.engine.records import hold, lock, next_queued_id
from scheduler.log_context import about_session, name_session
from scheduler.ports import Outcome, TurnResult
from scheduler.rules import failures, ladder
from scheduler.store.db import deciding_scope
from scheduler.store.models import EnqueuedMessage, Session, Status, Turn
from templates import render

OUTPUT_CHARS = 100_000  # a turn's output kept on its row
MODEL_CHARS = 200  # a model name as the agent said it; longer is not a name


def complete_turn(ctx: Context, turn_id: int, result: TurnResult) -> None:
    """The worker's report of one turn, taken exactly once (a second report is ignored)."""
    with about_session():  # a worker thread reports many turns: each names its own session
        now = ctx.clock.now()
        reading = read_quota(ctx, now)  # before the transaction: a quota source may read the database
        with deciding_scope(ctx.engine, wait=None) as db:  # a report waits its turn, however long
            work = Work(db, ctx, now, Effects(queue_pass=True), reading)  # a turn ending can free a slot
            turn = db.get(Turn, turn_id, with_for_update=True)
            if turn is None or turn.status != "running":
                return  # reported twice, or recovered already
            name_session(turn.session_id)
            turn.status = (
                "done"
                if result.outcome is Outcome.SUCCESS
                else ("halted" if result.outcome is Outcome.HALTED else "failed")
            )
            turn.outcome = result.outcome.value
            turn.cost_usd = result.cost_usd
            turn.output = result.output[:OUTPUT_CHARS]
            turn.error = result.error
            turn.duration_ms = result.duration_ms
            turn.model = result.model[:MODEL_CHARS] if result.model else None
            turn.finished_at = now
            db.add(turn)
            session = lock(db, turn.session_id)
            session.agent_session_id = result.agent_session_id or session.agent_session_id
            session.updated_at = now
            step = failures.next_step(result.outcome, session.consecutive_failures, now)
            session.consecutive_failures = step.failures
            for hook in ctx.plugins.turn_finished:
                if hook(work, session, turn, result, step):
                    db.add(session)
                    break  # a hook (queue holds) took charge of the session
            else:
                settle(work, session, turn, result, step)
        work.effects.apply(ctx)


def settle(work: Work, session: Session, turn: Turn, result: TurnResult, step: failures.NextStep) -> None:
    """The session's next state after its turn, as `failures.next_step` decided it. With
    `wiring.install`, `queue_holds.on_turn_finished` takes charge first of every step that places
    a queue hold; the requeue, block and fail branches here serve a context without it."""
    db, now, effects = work.db, work.now, work.effects
    if session.status == Status.ARCHIVED.value:
        return
    db.add(session)
    if step.action == failures.WAIT:
        session.status = Status.WAITING.value  # the pause that halted it owns the resume
        return
    if step.action in (failures.RETRY, failures.REQUEUE):
        if step.retry_at is not None:
            retry_at = step.retry_at
        elif result.rate_limit_reset_at is not None:
            retry_at = result.rate_limit_reset_at + timedelta(minutes=5)
        else:
            retry_at = now + ladder.rate_limit_delay(session.hold_count + 1)
        sentence = render(
            "text/turn_retry.j2", outcome=result.outcome.value, error=result.error or "", retry_at=retry_at
        )
        hold(
            work,
            session,
            TurnAttempt(turn.prompt, turn.attachments, turn.kind),
            Block(result.outcome.value, sentence, retry_at),
        )
        return
    if step.action in (failures.BLOCK, failures.FAIL):
        session.status = Status.FAILED.value if step.action == failures.FAIL else Status.BLOCKED.value
        session.finished_at = now
        effects.notice("failed", session_id=session.id, error=result.error, outcome=result.outcome.value,
                  retry_exhausted=step.queue_hold == "retry_exhausted", title=session.title)
        return
    if session.pending_sleep:
        session.status = Status.WAITING.value
        session.pending_sleep = False
        effects.notice("paused", session_id=session.id, reason=session.pause_reason)
        return
    queued_id = next_queued_id(db, session.id or 0)
    queued = db.get(EnqueuedMessage, queued_id) if queued_id is not None else None
    if queued is not None:
        queued.delivered_at = now
        db.add(queued)
        session.status = Status.WAITING.value
        db.flush()
        admit_in_queue(work, session, TurnAttempt(queued.prompt, queued.attachments, queued.kind))
        return
    session.status = Status.DONE.value
    session.finished_at = now
    effects.notice(
        "done",
        session_id=session.id,
        turn_id=turn.id,
        cost_usd=result.cost_usd,
        output=result.output[:500],
        title=session.title,
    )
