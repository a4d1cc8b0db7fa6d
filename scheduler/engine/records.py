"""The session row as the turn engine writes it: the hold record, the start of a turn, and the
reads every path into a turn makes (seed 001, "What hold does", "Consecutive holds back off").

The session row is the durable truth: the hold record carries the refused prompt and its
attachments, and the alarm (`recheck:<id>`) is only the clock that asks again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, inspect
from sqlalchemy import select as sa_select
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler import alarms
from scheduler.engine.attempt import PASS_THROUGH, Block, Submission, TurnAttempt, Work
from scheduler.errors import NotFound
from scheduler.ports import TurnRequest
from scheduler.rules import ladder
from scheduler.rules.gate import Decision
from scheduler.store.db import core
from scheduler.store.models import SESSIONS, EnqueuedMessage, Session, Status, Turn
from scheduler.store.session_rows import update_session
from scheduler.store.turn_reads import spent_by
from templates import error_text, render

STOPPED = ("halted", "failed")  # a turn cut off before its end


def hold_job_id(session_id: int) -> str:
    return f"recheck:{session_id}"


def wake_job_id(session_id: int) -> str:
    return f"wake:{session_id}"


def lock(db: DBSession, session_id: int) -> Session:
    row = db.get(Session, session_id, with_for_update=True)
    if row is None:
        raise NotFound(error_text("sessions/not_found", session_id=session_id))
    return row


_ROW = sa_select(*SESSIONS.c).where(SESSIONS.c.id == bindparam("id")).with_for_update()


def locked_copy(db: DBSession, session_id: int) -> Session | None:
    """The session's row, locked like `lock` but read as a detached, read-only copy: no ORM
    identity, no change tracking. A held session's re-check reads it, and when the gate still
    refuses, `hold` writes the next rung back as one UPDATE — about a third of what loading,
    tracking and flushing the row through the ORM costs, on the path every held session takes
    every ten to sixty minutes. Anything that would change the session in other ways reads it
    with `lock`."""
    row = core(db, _ROW, {"id": session_id}).first()
    return Session.model_construct(**row._mapping) if row is not None else None


def is_copy(session: Session) -> bool:
    return inspect(session, raiseerr=False) is None


_RUNNING_TURN = (
    sa_select(col(Turn.id)).where(col(Turn.session_id) == bindparam("sid"), col(Turn.status) == "running").limit(1)
)


_NEXT_QUEUED = (
    sa_select(col(EnqueuedMessage.id))
    .where(col(EnqueuedMessage.session_id) == bindparam("sid"), col(EnqueuedMessage.delivered_at).is_(None))
    .order_by(col(EnqueuedMessage.id))
    .limit(1)
)


def is_running(db: DBSession, session_id: int) -> bool:
    """Whether a worker is executing a turn of this session now (one indexed read, no ORM row)."""
    return core(db, _RUNNING_TURN, {"sid": session_id}).first() is not None


def running_turn(db: DBSession, session_id: int) -> Turn | None:
    stmt = select(Turn).where(Turn.session_id == session_id, Turn.status == "running")
    return db.exec(stmt).first()


def turn_request(db: DBSession, turn_id: int) -> TurnRequest | None:
    """What a worker machine runs for a running turn it claimed, read from its rows."""
    turn = db.get(Turn, turn_id)
    session = db.get(Session, turn.session_id) if turn is not None else None
    if turn is None or session is None or turn.status != "running":
        return None
    return TurnRequest(
        session_id=session.id or 0, turn_id=turn_id, prompt=turn.prompt, attachments=tuple(turn.attachments),
        agent_session_id=session.agent_session_id, workdir=session.workdir, runtime=turn.runtime,
        max_budget_usd=budget_left(db, session, turn.kind),
    )


def budget_left(db: DBSession, session: Session, kind: str) -> float | None:
    """What the session may still spend under its cost cap, for the agent to stop itself at;
    None without a cap, and for the turns a cap never stops (`PASS_THROUGH`)."""
    if session.cost_cap_usd is None or kind in PASS_THROUGH:
        return None
    return max(session.cost_cap_usd - spent_by(db, session.id or 0), 0.0)


def existing_attachments(attachments: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A repair path must not do more damage than it repairs: a descriptor whose file has
    vanished is dropped, and the turn comes back short an attachment rather than not at all."""
    kept = []
    for item in attachments:
        path = item.get("path")
        if path is None or Path(str(path)).exists():
            kept.append({str(k): v for k, v in item.items()})
    return kept


def clear_hold(session: Session) -> None:
    """Clearing the record resets the ladder: the next outage starts again at ten minutes."""
    session.hold_reason = None
    session.hold_count = 0
    session.hold_at = None
    session.hold_retry_at = None
    session.hold_sentence = None
    session.hold_prompt = None
    session.hold_attachments = []
    session.hold_turn_kind = None


def clear_pause(session: Session) -> None:
    session.pause_reason = None
    session.pause_at = None
    session.pause_detail = None
    session.paused_by = None
    session.pause_resume_prompt = None
    session.pending_sleep = False


def is_asleep(session: Session, now: datetime) -> bool:
    """A wall-clock pause not yet reached: every automatic start path declines it."""
    return session.wake_at is not None and session.wake_at > now


def start(work: Work, session: Session, attempt: TurnAttempt) -> Turn:
    """Start the turn: the session runs it, its hold and any pause are cleared, and the worker
    gets it once the transaction commits. With worker machines (`Context.dispatcher`) its job is
    deferred in this transaction, and the worker that takes the job claims the turn's owner and
    lease (`leases.claim`); until then no lease runs out on a turn that waits for a worker."""
    db, now, effects = work.db, work.now, work.effects
    attachments = attempt.attachments
    local = work.ctx.ports.dispatcher is None
    turn = Turn(
        session_id=session.id or 0,
        kind=attempt.kind,
        prompt=attempt.prompt or "",
        attachments=[dict(a) for a in attachments],
        status="running",
        runtime=session.runtime,
        created_at=now,
        started_at=now,
        owner=work.ctx.owner if local else None,
        lease_expires_at=now + work.ctx.limits.turn_lease if work.ctx.limits.turn_lease and local else None,
    )
    db.add(turn)
    db.info.pop("pacer.memo", None)  # what admission checks read per pass has changed
    clear_hold(session)
    if session.pause_reason is not None:
        clear_pause(session)
    session.park_reason = None
    session.park_at = None
    if attempt.kind == "wake":
        session.wake_at = None
        session.wake_prompt = None
    session.status = Status.RUNNING.value
    session.started_at = session.started_at or now
    session.updated_at = now
    db.add(session)
    db.flush()
    if work.ctx.ports.dispatcher is not None:
        turn.job_id = work.ctx.ports.dispatcher.enqueue(db, turn.id or 0, session.id or 0)
        db.add(turn)
    else:
        effects.dispatch.append(
            TurnRequest(
                session_id=session.id or 0,
                turn_id=turn.id or 0,
                prompt=attempt.prompt or "",
                attachments=tuple(attachments),
                agent_session_id=session.agent_session_id,
                workdir=session.workdir,
                runtime=session.runtime,
                max_budget_usd=budget_left(db, session, attempt.kind),
            )
        )
    effects.cancel(hold_job_id(session.id or 0))  # one turn, one alarm: a started turn needs none
    effects.notice("started", session_id=session.id, turn_id=turn.id, kind=attempt.kind, title=session.title)
    return turn


def halt_turn(work: Work, turn: Turn) -> None:
    """Stop a running turn (a pause, a preemption, an archive) wherever it runs. A turn on this
    process's workers is halted after commit; a worker machine's job is cancelled in this
    transaction, so the halt commits with the decision. A job no worker had taken never runs:
    its turn is reported HALTED after commit, and given a lease now, so a report lost to a crash
    comes back through recovery rather than leave the turn running forever."""
    dispatcher = work.ctx.ports.dispatcher
    if turn.job_id is None or dispatcher is None:
        work.effects.halt.append(turn.id or 0)
        return
    if dispatcher.halt(work.db, turn.job_id):
        turn.lease_expires_at = work.now + (work.ctx.limits.turn_lease or timedelta(0))
        work.db.add(turn)
        work.effects.unstarted.append(turn.id or 0)


def hold(
    work: Work, session: Session, attempt: TurnAttempt, block: Block, decision: Decision | None = None
) -> Submission:
    """Hold the turn: its prompt and attachments go on the row, and the alarm asks again at the
    block's own time or the ladder's next rung."""
    db, now, effects = work.db, work.now, work.effects
    reason, sentence = block.reason, block.sentence
    new = session.hold_reason != reason
    count = session.hold_count + 1
    due = None if block.park else block.retry_at or now + ladder.next_delay(reason, count) + ladder.jitter(work.ctx.rng)
    record: dict[str, Any] = {
        "hold_reason": reason,
        "hold_count": count,
        "hold_at": now,
        "hold_retry_at": due,
        "hold_sentence": sentence,
        "hold_prompt": attempt.prompt,
        "hold_attachments": [dict(a) for a in attempt.attachments],
        "hold_turn_kind": attempt.kind,
        "updated_at": now,
    }
    if block.park:  # the park's own sweep resumes it: no ladder, no alarm
        record.update(park_reason=reason, park_at=session.park_at if session.park_reason == reason else now)
    if session.status != Status.ARCHIVED.value:
        record["status"] = Status.WAITING.value  # dormant, not needs_input: nobody has to act
    # One write whichever copy the caller holds: the record goes back as one UPDATE, and a tracked
    # row takes it as its committed state, so no later flush writes it a second time.
    copy = is_copy(session)
    if not copy:
        db.flush()  # the caller's own pending changes land first; the record overrides them
    update_session(db, session.id, record)
    for name, value in record.items():
        if copy:
            session.__dict__[name] = value  # a plain value object: no instrumentation to go through
        else:
            set_committed_value(session, name, value)
    if due is None:
        effects.cancel(hold_job_id(session.id or 0))
    else:
        effects.alarm(hold_job_id(session.id or 0), due, alarms.RECHECK, session.id)
    if new:  # a hold announces itself once; a change of reason counts as new
        effects.notice(
            "held", session_id=session.id, reason=reason, sentence=sentence, retry_at=due, title=session.title
        )
    return Submission("held", session.id or 0, reason=reason, sentence=sentence, retry_at=due, decision=decision)


def replay(db: DBSession, session: Session) -> TurnAttempt:
    """The held turn, as its re-check asks it again. A held resume (a cost cap's halt) carries on
    as `resume_turn` says."""
    if session.hold_prompt is None:  # a hold recorded without its prompt comes back on a recovery nudge
        return TurnAttempt(render("text/recovery_nudge.j2", session=session), [], "recovery")
    if session.hold_turn_kind == "resume":
        return resume_turn(db, session, session.hold_prompt)
    return TurnAttempt(
        session.hold_prompt, existing_attachments(session.hold_attachments or []), session.hold_turn_kind or "first"
    )


def last_turn(db: DBSession, session_id: int) -> Turn | None:
    return db.exec(select(Turn).where(Turn.session_id == session_id).order_by(col(Turn.id).desc())).first()


def resume_turn(db: DBSession, session: Session, nudge: str) -> TurnAttempt:
    """The turn that carries a session on after its last one stopped (a pause, a preemption, a
    park or a cost cap halted it): `nudge`, which the runner delivers into the conversation the
    agent named (`--resume`). When it named none — an agent that names it only in its final
    result, cut off before it — the nudge would reach an agent that never saw the task: the
    stopped turn goes again instead, with its attachments."""
    return stopped_turn(db, session) or TurnAttempt(nudge, [], "resume")


def stopped_turn(db: DBSession, session: Session) -> TurnAttempt | None:
    """The last turn again, when it was cut off (halted, or failed) with no conversation to resume."""
    if session.agent_session_id is not None:
        return None
    previous = last_turn(db, session.id or 0)
    if previous is None or previous.status not in STOPPED:
        return None
    return TurnAttempt(previous.prompt, existing_attachments(previous.attachments), previous.kind)


def next_queued_id(db: DBSession, session_id: int) -> int | None:
    """The first undelivered message in the session's durable queue (most turns end with none)."""
    found = core(db, _NEXT_QUEUED, {"sid": session_id}).scalar()
    return int(found) if found is not None else None
