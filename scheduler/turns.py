"""Turns: every turn passes the gate; an admitted one runs, a refused one is held — deferred with
backoff, never dropped (seed 001, "What hold does" … "Every turn is gated, not just the first").

The session row is the durable truth: the hold record carries the refused prompt and its
attachments, and the alarm (`recheck:<id>`) is only the clock that asks again. The queue looks
again whenever something could free work (`kick`), and then it is precedence, not the timing of
one session's alarm, that decides who takes a freed slot.

The same order holds at every door: a spot turn the gate would admit first offers the room to
the spot work ranked ahead of it (`_ahead_first`), and a session the scheduler paused mid-run
keeps its place at the front — a pass resumes it, through the sweep's own resume and its margin,
before held work of its rank or below (`_in_order`). A person's StartNow is the exception: it
ignores position order (seed 002).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import bindparam, inspect, update
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler import failures, ladder
from scheduler.admission import is_manual, present, wrote
from scheduler.context import Context
from scheduler.db import core, session_scope
from scheduler.effects import Effects
from scheduler.errors import InvalidInput, NotFound, Refused
from scheduler.explain import explain
from scheduler.fleet import asking_for, build_snapshot, burn_rate, read_quota
from scheduler.gate import RESUME_MARGIN_PCT, Decision, Reason, decide
from scheduler.genesis import SchedulingClass
from scheduler.models import SESSIONS, EnqueuedMessage, Session, Status, Turn
from scheduler.policy import PolicyView, load_policy
from scheduler.ports import Outcome, QuotaReading, TurnRequest, TurnResult
from scheduler.sessions import class_defaults, class_expr_for, class_from, is_spot, queue_order
from scheduler.snapshot import Asking

if TYPE_CHECKING:
    from scheduler.pause import Dormant

log = logging.getLogger("pacer.turns")

PASS_THROUGH = frozenset({"clone_only", "monitoring"})  # spend nothing: never gated
TURN_KINDS = frozenset(
    {"first", "follow_up", "wake", "poll", "restart", "nudge", "recovery", "resume", "human"} | PASS_THROUGH
)
PUMP_LIMIT = 25  # candidates examined per queue pass: bounds the cost of a kick
GLOBAL_REASONS = frozenset({Reason.FLEET_AT_CAP})


@dataclass(frozen=True)
class Block:
    """An admission check beyond the gate said no (an operator hold, a queue hold, a busy
    concurrency group, a prerequisite). `retry_at` None means: the ladder decides."""

    reason: str
    sentence: str
    retry_at: datetime | None = None
    skip_only: bool = True  # True: later candidates may still run (no head-of-line blocking)


@dataclass(frozen=True)
class Submission:
    outcome: str  # started | held | queued | refused
    session_id: int
    turn_id: int | None = None
    reason: str | None = None
    sentence: str = ""
    retry_at: datetime | None = None
    decision: Decision | None = None


def hold_job_id(session_id: int) -> str:
    return f"recheck:{session_id}"


def wake_job_id(session_id: int) -> str:
    return f"wake:{session_id}"


def lock(db: DBSession, session_id: int) -> Session:
    row = db.get(Session, session_id, with_for_update=True)
    if row is None:
        raise NotFound(f"session #{session_id} does not exist")
    return row


_ROW = sa_select(*SESSIONS.c).where(SESSIONS.c.id == bindparam("id")).with_for_update()


def peek(db: DBSession, session_id: int) -> Session | None:
    """The session's row, locked like `lock` but read as a detached, read-only copy: no ORM
    identity, no change tracking. A held session's re-check reads it, and when the gate still
    refuses, `_hold` writes the next rung back as one UPDATE — about a third of what loading,
    tracking and flushing the row through the ORM costs, on the path every held session takes
    every ten to sixty minutes. Anything that would change the session in other ways reads it
    with `lock`."""
    row = core(db, _ROW, {"id": session_id}).first()
    return Session.model_construct(**row._mapping) if row is not None else None


def is_peeked(session: Session) -> bool:
    return inspect(session, raiseerr=False) is None


_HOLD_UPDATES: dict[tuple[str, ...], Any] = {}


def _hold_update(columns: tuple[str, ...]) -> Any:
    """UPDATE sessions SET <columns> for one row, built once per set of columns."""
    stmt = _HOLD_UPDATES.get(columns)
    if stmt is None:
        stmt = _HOLD_UPDATES[columns] = (
            update(SESSIONS).where(SESSIONS.c.id == bindparam("row_id")).values({c: bindparam(f"v_{c}") for c in columns})
        )
    return stmt


_RUNNING_TURN = sa_select(col(Turn.id)).where(col(Turn.session_id) == bindparam("sid"), col(Turn.status) == "running").limit(1)


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


# --------------------------------------------------------------------------- admission


def _blocked(ctx: Context, db: DBSession, session: Session, now: datetime) -> Block | None:
    for check in ctx.admission_checks:
        try:
            block: Block | None = check(db, session, now)
        except Exception:  # a check that cannot be read fails open, with a log line
            log.exception("admission check %s failed; failing open", getattr(check, "__name__", check))
            continue
        if block is not None:
            return block
    return None


def _start(
    db: DBSession, ctx: Context, session: Session, prompt: str, attachments: Sequence[Mapping[str, Any]],
    kind: str, now: datetime, fx: Effects,
) -> Turn:
    turn = Turn(
        session_id=session.id or 0, kind=kind, prompt=prompt, attachments=[dict(a) for a in attachments],
        status="running", runtime=session.runtime, created_at=now, started_at=now,
    )
    db.add(turn)
    db.info.pop("pacer.admission", None)  # what admission checks read per pass has changed
    clear_hold(session)
    if session.pause_reason is not None:
        clear_pause(session)
    session.park_reason = None
    session.park_at = None
    if kind == "wake":
        session.wake_at = None
        session.wake_prompt = None
    session.status = Status.RUNNING.value
    session.started_at = session.started_at or now
    session.updated_at = now
    db.add(session)
    db.flush()
    fx.dispatch.append(
        TurnRequest(
            session_id=session.id or 0, turn_id=turn.id or 0, prompt=prompt, attachments=tuple(attachments),
            agent_session_id=session.agent_session_id, workdir=session.workdir, runtime=session.runtime,
        )
    )
    fx.cancel(hold_job_id(session.id or 0))  # one turn, one alarm: a started turn needs none
    fx.notice("started", session_id=session.id, turn_id=turn.id, kind=kind, title=session.title)
    return turn


def _hold(
    db: DBSession, ctx: Context, session: Session, prompt: str | None, attachments: Sequence[Mapping[str, Any]],
    kind: str, reason: str, sentence: str, now: datetime, fx: Effects, *, retry_at: datetime | None = None,
    decision: Decision | None = None,
) -> Submission:
    new = session.hold_reason != reason
    count = session.hold_count + 1
    due = retry_at or now + ladder.next_delay(reason, count) + ladder.jitter(ctx.rng)
    record: dict[str, Any] = {
        "hold_reason": reason, "hold_count": count, "hold_at": now, "hold_retry_at": due,
        "hold_sentence": sentence, "hold_prompt": prompt, "hold_attachments": [dict(a) for a in attachments],
        "hold_turn_kind": kind, "updated_at": now,
    }
    if session.status != Status.ARCHIVED.value:
        record["status"] = Status.WAITING.value  # dormant, not needs_input: nobody has to act
    if is_peeked(session):  # a re-check's read-only copy: the record goes back as one UPDATE
        core(db, _hold_update(tuple(record)), {"row_id": session.id, **{f"v_{k}": v for k, v in record.items()}})
        wrote(db, Session)
    else:
        for name, value in record.items():
            setattr(session, name, value)
        db.add(session)
        db.flush()
    fx.alarm(hold_job_id(session.id or 0), due, "recheck", session.id)
    if new:  # a hold announces itself once; a change of reason counts as new
        fx.notice("held", session_id=session.id, reason=reason, sentence=sentence, retry_at=due, title=session.title)
    return Submission("held", session.id or 0, reason=reason, sentence=sentence, retry_at=due, decision=decision)


def _decision(db: DBSession, ctx: Context, policy: PolicyView, session: Session, reading: QuotaReading | None, now: datetime) -> Decision:
    snapshot = build_snapshot(db, ctx, policy, reading)
    # A session whose deliverer already flipped it to running is counted in the fleet itself.
    return decide(snapshot, asking_for(session, ctx, policy, running=is_running(db, session.id or 0)), now)


def _admit(
    db: DBSession, ctx: Context, session: Session, prompt: str, attachments: Sequence[Mapping[str, Any]],
    kind: str, reading: QuotaReading | None, now: datetime, fx: Effects, *, queue_first: bool = True,
) -> Submission:
    """Admit one turn, or hold it. `queue_first`: the queue ranked ahead of this session goes first
    (`_ahead_first`); False for the sweep's resume, which is itself the front of the queue."""
    policy = load_policy(db)
    if kind in PASS_THROUGH:
        turn = _start(db, ctx, session, prompt, attachments, kind, now, fx)
        return Submission("started", session.id or 0, turn.id, reason="pass_through")
    if not is_spot(session, policy) and session.hold_reason in (Reason.AT_UTILIZATION_LIMIT, Reason.FLEET_AT_CAP):
        clear_hold(session)  # a hold a promotion has overtaken is a fossil: the class wins
    block = _blocked(ctx, db, session, now)
    if block is not None:
        return _hold(db, ctx, session, prompt, attachments, kind, block.reason, block.sentence, now, fx, retry_at=block.retry_at)
    decision = _decision(db, ctx, policy, session, reading, now)
    if decision.held and session.bookkeeping:
        # Pacer's own bookkeeping is refused, never queued: a deferral would outlive its use.
        session.status = Status.ARCHIVED.value
        session.updated_at = now
        db.add(session)
        sentence = explain(decision, now).why
        fx.notice("refused", session_id=session.id, sentence=sentence)
        return Submission("refused", session.id or 0, reason=decision.reason, sentence=sentence, decision=decision)
    if decision.allowed and queue_first and not session.bookkeeping and _ahead_first(db, ctx, policy, session, reading, now, fx):
        # What the queue ahead left is asked whole: a session it started may hold this one's
        # group or capacity now, not only its slot and its money.
        return _admit(db, ctx, session, prompt, attachments, kind, reading, now, fx, queue_first=False)
    if decision.allowed:
        for hook in ctx.hooks.get("before_start", []):
            hook(db, ctx, session, decision, now, fx)  # preemption lives here: it never raises
        turn = _start(db, ctx, session, prompt, attachments, kind, now, fx)
        return Submission("started", session.id or 0, turn.id, reason=decision.reason, decision=decision)
    text = explain(decision, now)
    return _hold(db, ctx, session, prompt, attachments, kind, decision.reason, text.sentence(), now, fx, decision=decision)


def _ahead_first(
    db: DBSession, ctx: Context, policy: PolicyView, session: Session, reading: QuotaReading | None, now: datetime,
    fx: Effects,
) -> bool:
    """A spot turn the gate would admit does not overtake spot work ranked ahead of it: the held
    sessions above it in the queue, and the session paused mid-run at its front, are offered the
    room first, in order — the queue pass's own loop, bounded at this session. Returns whether
    any of them started (the caller asks the gate again about what is left).

    Without this, work arriving between passes took the room whenever the pace had it, and under
    sustained demand the oldest held work and the paused sessions waited days behind newer work
    of the same precedence. A person's direct start (StartNow) is exempt: it ignores position
    order (seed 002)."""
    if is_manual() or not is_spot(session, policy):
        return False
    ahead = [c for c in _candidates(db, policy, now, PUMP_LIMIT) if c.id != session.id and c.is_spot(policy) and outranks(c, session)]
    front = _front_paused(db, policy, now)
    if front is not None and (front.id == session.id or not outranks(front, session)):
        front = None
    if not ahead and front is None:
        return False
    started: list[int] = []
    _in_order(db, ctx, _PassGate(db, ctx, policy, reading, now), policy, ahead, front, reading, now, fx, started)
    return bool(started)


TAKES_OVER = frozenset({"follow_up", "human", "restart"})  # addressed to the session by someone


def _waits_behind(session: Session, kind: str, busy: bool, now: datetime) -> str | None:
    """Why a new turn waits in the session's queue instead of being admitted, or None."""
    if busy:
        return "busy"
    if session.hold_reason is not None:
        return "behind_held_turn"
    if session.pause_reason is not None and kind != "wake":
        return "paused"  # a wake that came due is the one other door (seed 001, "A pause outranks precedence")
    if is_asleep(session, now) and kind not in TAKES_OVER:
        return "asleep"
    return None


def submit_turn(
    ctx: Context, session_id: int, prompt: str, attachments: Sequence[Mapping[str, Any]] = (), *, kind: str = "first",
) -> Submission:
    """The one door every turn comes through: first start, follow-up, wake, poll, restart."""
    if kind not in TURN_KINDS:
        raise InvalidInput(f"kind: {kind!r} is not a turn kind; use one of {', '.join(sorted(TURN_KINDS))}", field="kind")
    now = ctx.clock.now()
    reading = read_quota(ctx, now)
    fx = Effects()
    with session_scope(ctx.engine) as db:
        session = lock(db, session_id)
        if session.status == Status.ARCHIVED.value:
            raise Refused(f"session #{session_id} is archived; it takes no more turns")
        busy = is_running(db, session_id)
        waits = None if kind in PASS_THROUGH else _waits_behind(session, kind, busy, now)
        if waits is not None:
            # Two jobs racing one session would drop one prompt: the later one waits in the
            # durable queue and is delivered after the turn ahead of it. A paused session's
            # pause has one resume owner (seed 001), which delivers it; a wake still ahead is
            # the session's next event. The hold, the pause and the wake are left alone.
            db.add(EnqueuedMessage(session_id=session_id, prompt=prompt, attachments=[dict(a) for a in attachments], kind=kind, created_at=now))
            result = Submission("queued", session_id, reason=waits)
            fx.kick = waits == "paused"  # the queue pass resumes the front paused session, margin and all
        else:
            if is_asleep(session, now):  # a person taking the session over consumes its wake
                session.wake_at = None
                session.wake_prompt = None
                fx.cancel(wake_job_id(session_id))
            result = _admit(db, ctx, session, prompt, attachments, kind, reading, now, fx)
    fx.apply(ctx)
    return result


# --------------------------------------------------------------------------- alarms and the queue pass


@dataclass(frozen=True)
class _Candidate:
    """What a queue pass needs to ask the gate about a held session: a few columns, not the row.
    The whole row is read only for a candidate the gate would admit."""

    id: int
    scheduling_class: str | None
    genesis: str
    runtime: str
    precedence: int
    created_at: datetime

    def is_spot(self, policy: PolicyView) -> bool:
        return class_from(self.scheduling_class, self.genesis, policy) is SchedulingClass.SPOT


_CANDIDATE_COLUMNS: tuple[Any, ...] = (
    Session.id, Session.scheduling_class, Session.genesis, Session.runtime, Session.precedence, Session.created_at, Session.wake_at,
)


def _candidates(db: DBSession, policy: PolicyView, now: datetime, limit: int) -> list[_Candidate]:
    """Dormant held sessions, in queue order: priority above, then precedence, then age. A failed
    turn waiting out its retry backoff is not one until its retry time: that time is a floor
    (seed 002's six attempts are attempts over time), lifted only by its own alarm."""
    return [
        _Candidate(int(sid or 0), own, str(genesis), str(runtime), int(precedence), created_at)
        for sid, own, genesis, runtime, precedence, created_at, wake_at in core(db, _candidates_stmt(class_defaults(policy), limit), {"now": now})
        if wake_at is None or wake_at <= now  # asleep: every automatic path declines it
    ]


@lru_cache(maxsize=16)
def _candidates_stmt(defaults: tuple[SchedulingClass, ...], limit: int) -> Any:
    """Built once per set of class defaults: every queue pass runs it."""
    resolved = class_expr_for(defaults)
    return (
        sa_select(*_CANDIDATE_COLUMNS)
        .where(
            col(Session.status) == Status.WAITING.value,
            col(Session.hold_reason).is_not(None),
            col(Session.pause_reason).is_(None),
            col(Session.park_reason).is_(None),
            col(Session.hold_reason).not_in(sorted(failures.RETRY_HOLD_REASONS)) | (col(Session.hold_retry_at) <= bindparam("now")),
        )
        .order_by(*queue_order(resolved))
        .limit(limit)
    )


def _replay(session: Session) -> tuple[str, list[dict[str, Any]], str]:
    prompt = session.hold_prompt
    kind = session.hold_turn_kind or "first"
    if prompt is None:  # a hold recorded without its prompt comes back on a recovery nudge
        from templates import render

        return render("text/recovery_nudge.j2", session=session), [], "recovery"
    return prompt, existing_attachments(session.hold_attachments or []), kind


def pump(ctx: Context, *, due_session: int | None = None) -> list[int]:
    """One pass over the queue: admit held sessions in rank order while the gate allows.

    A session the gate refuses for a reason of its own (its burn, its group, an operator hold)
    is skipped, not allowed to block those behind it; a full fleet ends the pass. `due_session`
    is the session whose alarm fired: if it is not admitted its ladder advances and it is
    re-armed; others keep their alarms.
    """
    now = ctx.clock.now()
    reading = read_quota(ctx, now)
    fx = Effects()
    started: list[int] = []
    with session_scope(ctx.engine) as db:
        policy = load_policy(db)
        gate = _PassGate(db, ctx, policy, reading, now)
        due = peek(db, due_session) if due_session is not None else None
        if due is not None and not _is_due_candidate(due, now):
            due = None
        if due is not None and not gate.decide(due).allowed:
            # The gate refuses the session whose alarm fired: its ladder advances and the queue
            # is not scanned. Those asking otherwise (priority, a smaller burn) have alarms of
            # their own, and whatever frees room (a turn ending, a release, a policy change)
            # kicks a full pass.
            if _try(db, ctx, gate, due, now, fx, advance=True)[0] == "started":
                started.append(due.id or 0)  # refused, then admitted on the second ask (see `_try`)
            due = None
            candidates: list[_Candidate] = []
            front = None  # a refused alarm does not scan: whatever frees room kicks a full pass
        else:
            if due is not None:
                due = db.get(Session, due.id)  # it may start: the tracked row (locked above)
            candidates = _candidates(db, policy, now, PUMP_LIMIT)
            front = _front_paused(db, policy, now)
        if candidates or front is not None:
            due = _in_order(db, ctx, gate, policy, candidates, front, reading, now, fx, started, due=due, due_session=due_session)
        if due is not None:  # beyond the examined slice, or the pass stopped above it
            _try(db, ctx, gate, due, now, fx, advance=True)
    fx.apply(ctx)
    return started


def _in_order(
    db: DBSession, ctx: Context, gate: _PassGate, policy: PolicyView, candidates: Sequence[_Candidate],
    front: Dormant | None, reading: QuotaReading | None, now: datetime, fx: Effects, started: list[int],
    *, due: Session | None = None, due_session: int | None = None,
) -> Session | None:
    """Admit `candidates` (held sessions, in queue order) while the gate allows, the paused
    session at the front (`front`) in its place among them. Returns the due session if it was
    not reached."""
    # With a hold store in use, a refused candidate is still read whole: its own check may
    # now say why it waits (an operator hold placed over it), and that is restated.
    restate = any(present(db, key) for key in ("operator_holds", "queue_holds", "prerequisite_sessions"))
    for cand in candidates:
        if front is not None and cand.is_spot(policy) and outranks(front, cand):
            _resume_front(db, ctx, gate, front, reading, now, fx, started)
            front = None
        if due is not None and cand.id == due.id:
            due = None  # examined in its place in the queue
        elif cand.id != due_session and not restate:
            decision = gate.decide_for(cand)
            if not decision.allowed:  # the same answer every candidate asking alike gets
                if _stops(decision):
                    break
                continue
        session = locked_unless_taken(db, cand.id)
        if session is None or not _still_held(session, now):
            continue  # another transaction has it (PostgreSQL): it is that pass's to admit or re-hold
        outcome, stop = _try(db, ctx, gate, session, now, fx, advance=cand.id == due_session)
        if outcome == "started":
            started.append(cand.id)
        if stop:
            break
    if front is not None:  # no held spot work ranked below it was examined
        _resume_front(db, ctx, gate, front, reading, now, fx, started)
    return due


class _Ranked(Protocol):
    @property
    def id(self) -> int | None: ...
    @property
    def precedence(self) -> int: ...
    @property
    def created_at(self) -> datetime: ...


def outranks(a: _Ranked, b: _Ranked) -> bool:
    """The queue's order between two spot sessions (`sessions.queue_order`): higher precedence
    first, then the older, then the lower id."""
    return (-a.precedence, a.created_at, a.id or 0) < (-b.precedence, b.created_at, b.id or 0)


def _front_paused(db: DBSession, policy: PolicyView, now: datetime) -> Dormant | None:
    from scheduler.pause import front_paused  # pause builds on this module

    return front_paused(db, policy, now)


def _resume_front(
    db: DBSession, ctx: Context, gate: _PassGate, front: Dormant, reading: QuotaReading | None, now: datetime,
    fx: Effects, started: list[int],
) -> None:
    """A session paused mid-run goes back before held spot work of its precedence or below takes
    the room (seed 001, "What brings it back": paused sessions keep their place at the front).
    Without this the ceiling sweep, every five minutes, finds the room a turn's end freed
    already taken by the held work the kick admitted, and a paused session can wait days. The
    resume is the sweep's own (`pause.resume_paused`): against the reserve widened by the resume
    margin, one per pass — a freed slot, not a batch."""
    from scheduler.pause import is_dormant_paused, resume_paused

    if not gate.decide_for(front, margin=RESUME_MARGIN_PCT).allowed:
        return  # the resume's own question, from columns: nothing is locked or rendered for a no
    session = locked_unless_taken(db, front.id)
    if session is None or not is_dormant_paused(session):
        return  # another transaction has it, or resumed it a moment ago
    if resume_paused(db, ctx, session, reading, now, fx).started:
        started.append(front.id)
        gate.fleet_changed()


# Rows a pass acts on are locked, skipping any another transaction holds (PostgreSQL; SQLite's
# BEGIN IMMEDIATE already serialises writers): two passes — a kick, an alarm, a turn arriving —
# never start one session twice, and never wait on each other's rows in different orders.
_LOCK_UNLESS_TAKEN = (  # built once: `Session.get` with a lock builds its statement every call
    sa_select(Session)
    .where(col(Session.id) == bindparam("sid"))
    .with_for_update(skip_locked=True)
    .execution_options(populate_existing=True)
)


def locked_unless_taken(db: DBSession, session_id: int) -> Session | None:
    """The row, locked and read fresh — or None when another transaction holds it (PostgreSQL)."""
    row: Session | None = db.execute(_LOCK_UNLESS_TAKEN, {"sid": session_id}).scalars().first()
    return row


def _still_held(session: Session, now: datetime) -> bool:
    """Still a dormant held session once locked: read before the lock, it may have started since."""
    return session.status == Status.WAITING.value and _dormant_hold(session, now)


def _dormant_hold(session: Session, now: datetime) -> bool:
    """Holding a turn for the queue, and nothing else owns it: not paused, parked or asleep."""
    return session.hold_reason is not None and session.pause_reason is None and session.park_reason is None and not is_asleep(session, now)


def _is_due_candidate(session: Session, now: datetime) -> bool:
    if session.status == Status.ARCHIVED.value:
        log.info("session #%s is archived: its re-check stops here", session.id)
        return False
    if session.hold_reason is None:
        return False
    if is_asleep(session, now):
        log.info("session #%s is asleep until %s: its re-check stands down", session.id, session.wake_at)
        return False
    return _dormant_hold(session, now)


class _PassGate:
    """The gate for one queue pass: the snapshot is built once and rebuilt only after a start
    changes the fleet, and candidates that ask the same question (class, quota, burn) against the
    same snapshot get the same answer without asking again. A held candidate runs no turn, so it
    is never counted in the fleet it is asking about."""

    def __init__(self, db: DBSession, ctx: Context, policy: PolicyView, reading: QuotaReading | None, now: datetime) -> None:
        self.db, self.ctx, self.policy, self.reading, self.now = db, ctx, policy, reading, now
        self._snapshot: Any = None
        self._memo: dict[tuple[bool, bool, float, float], Decision] = {}

    def decide(self, session: Session) -> Decision:
        running = session.status == Status.RUNNING.value and is_running(self.db, session.id or 0)
        asking = asking_for(session, self.ctx, self.policy, running=running)
        if running:
            if self._snapshot is None:
                self._snapshot = build_snapshot(self.db, self.ctx, self.policy, self.reading)
                self._memo.clear()
            return decide(self._snapshot, asking, self.now)
        return self._ask(asking)

    def decide_for(self, cand: _Candidate | Dormant, *, margin: float = 0.0) -> Decision:
        """The gate's answer for a held or paused candidate (never running), from its columns
        alone; `margin` widens the reserve as a resume does (`pause.resume_refusal`)."""
        asking = Asking(
            session_id=cand.id, is_spot=cand.is_spot(self.policy), already_running=False,
            spends_quota=self.ctx.runtime(cand.runtime).spends_quota, burn_per_min=burn_rate(self.ctx, cand.runtime),
        )
        return self._ask(asking, margin)

    def _ask(self, asking: Asking, margin: float = 0.0) -> Decision:
        if self._snapshot is None:
            self._snapshot = build_snapshot(self.db, self.ctx, self.policy, self.reading)
            self._memo.clear()
        key = (asking.is_spot, asking.spends_quota, asking.burn_per_min, margin)
        if key not in self._memo:
            self._memo[key] = decide(self._snapshot, asking, self.now, reserve_margin_pct=margin)
        return self._memo[key]

    def fleet_changed(self) -> None:
        self._snapshot = None


def _try(
    db: DBSession, ctx: Context, gate: _PassGate, session: Session, now: datetime, fx: Effects, *, advance: bool,
) -> tuple[str, bool]:
    """Ask once for a held session. Returns (outcome, stop the pass?)."""
    prompt, attachments, kind = _replay(session)
    block = _blocked(ctx, db, session, now)
    if block is not None:
        if advance or _restates(session, block):
            _hold(db, ctx, session, session.hold_prompt, session.hold_attachments, kind, block.reason, block.sentence, now, fx, retry_at=block.retry_at)
        return "held", not block.skip_only
    decision = gate.decide(session)
    if decision.allowed:
        if is_peeked(session):
            # Refused a moment ago, admitted now (a burn table refreshed between the two asks):
            # a start changes the row, so it goes through the tracked one (locked already).
            session = lock(db, session.id or 0)
        for hook in ctx.hooks.get("before_start", []):
            hook(db, ctx, session, decision, now, fx)
        _start(db, ctx, session, prompt, attachments, kind, now, fx)
        gate.fleet_changed()
        return "started", False
    if advance:
        text = explain(decision, now)
        _hold(db, ctx, session, session.hold_prompt, session.hold_attachments, kind, decision.reason, text.sentence(), now, fx, decision=decision)
    return "held", _stops(decision)


def _stops(decision: Decision) -> bool:
    """A full fleet or a spent budget holds everyone behind too; a pace hold may be this
    session's own burn, so smaller work behind it is still asked."""
    return decision.reason in GLOBAL_REASONS or decision.stops_running_work


def _restates(session: Session, block: Block) -> bool:
    """A candidate that is not due keeps its alarm — unless its record no longer says why it
    waits (another check holds it now) or the block's own time comes before that alarm."""
    if session.hold_reason != block.reason:
        return True
    return block.retry_at is not None and (session.hold_retry_at is None or block.retry_at < session.hold_retry_at)


def recheck(ctx: Context, session_id: int) -> list[int]:
    """The alarm of one held session: the queue looks again, this session among it."""
    return pump(ctx, due_session=session_id)


def kick(ctx: Context) -> None:
    """Something changed that could free work: look again now (coalesced under one id)."""
    ctx.schedule("kick", ctx.clock.now(), "kick")


# --------------------------------------------------------------------------- completion


def completion(ctx: Context, turn_id: int) -> Callable[[TurnResult], None]:
    def on_done(result: TurnResult) -> None:
        complete_turn(ctx, turn_id, result)

    return on_done


def complete_turn(ctx: Context, turn_id: int, result: TurnResult) -> None:
    now = ctx.clock.now()
    reading = read_quota(ctx, now)
    fx = Effects(kick=True)  # a turn ending can free a slot
    with session_scope(ctx.engine) as db:
        turn = db.get(Turn, turn_id, with_for_update=True)
        if turn is None or turn.status != "running":
            return  # reported twice, or recovered already
        turn.status = "done" if result.outcome is Outcome.SUCCESS else ("halted" if result.outcome is Outcome.HALTED else "failed")
        turn.outcome = result.outcome.value
        turn.cost_usd = result.cost_usd
        turn.output = result.output[:100_000]
        turn.error = result.error
        turn.duration_ms = result.duration_ms
        turn.finished_at = now
        db.add(turn)
        session = lock(db, turn.session_id)
        session.agent_session_id = result.agent_session_id or session.agent_session_id
        session.updated_at = now
        step = failures.next_step(result.outcome, session.consecutive_failures, now)
        session.consecutive_failures = step.failures
        for hook in ctx.hooks.get("turn_finished", []):
            if hook(db, ctx, session, turn, result, step, now, fx):
                db.add(session)
                break  # a hook (queue holds) took charge of the session
        else:
            _settle(db, ctx, session, turn, result, step, reading, now, fx)
    fx.apply(ctx)


def _settle(
    db: DBSession, ctx: Context, session: Session, turn: Turn, result: TurnResult, step: failures.NextStep,
    reading: QuotaReading | None, now: datetime, fx: Effects,
) -> None:
    """The session's next state after its turn, as `failures.next_step` decided it. With
    `wiring.install`, `queue_holds.on_turn_finished` takes charge first of every step that places
    a queue hold; the requeue, block and fail branches here serve a context without it."""
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
        from templates import render

        sentence = render("text/turn_retry.j2", outcome=result.outcome.value, error=result.error or "", retry_at=retry_at)
        _hold(db, ctx, session, turn.prompt, turn.attachments, turn.kind, result.outcome.value, sentence, now, fx, retry_at=retry_at)
        return
    if step.action in (failures.BLOCK, failures.FAIL):
        session.status = Status.FAILED.value if step.action == failures.FAIL else Status.BLOCKED.value
        session.finished_at = now
        fx.notice("failed", session_id=session.id, error=result.error, outcome=result.outcome.value,
                  retry_exhausted=step.queue_hold == "retry_exhausted", title=session.title)
        return
    if session.pending_sleep:
        session.status = Status.WAITING.value
        session.pending_sleep = False
        fx.notice("paused", session_id=session.id, reason=session.pause_reason)
        return
    queued_id = core(db, _NEXT_QUEUED, {"sid": session.id}).scalar()  # most turns end with none queued
    queued = db.get(EnqueuedMessage, queued_id) if queued_id is not None else None
    if queued is not None:
        queued.delivered_at = now
        db.add(queued)
        session.status = Status.WAITING.value
        db.flush()
        _admit(db, ctx, session, queued.prompt, queued.attachments, queued.kind, reading, now, fx)
        return
    session.status = Status.DONE.value
    session.finished_at = now
    db.add(session)
    fx.notice("done", session_id=session.id, turn_id=turn.id, cost_usd=result.cost_usd, output=result.output[:500], title=session.title)
