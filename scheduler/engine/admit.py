"""Admission of one turn: every turn passes the gate; an admitted one runs, a refused one is held
— deferred with backoff, never dropped (seed 001, "What hold does" … "Every turn is gated, not
just the first").

The checks beyond the gate, then the gate on a snapshot of the fleet and the windows: the one
verdict every path asks (`scheduler.engine.verdict`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from scheduler import alarms
from scheduler.engine.attempt import PASS_THROUGH, Submission, TurnAttempt, Work
from scheduler.engine.fleet import asking_for, build_snapshot
from scheduler.engine.records import clear_hold, hold, start
from scheduler.engine.verdict import Verdict, verdict
from scheduler.log_context import about_session
from scheduler.rules.explain import explain
from scheduler.rules.gate import Decision, Reason, decide
from scheduler.rules.snapshot import PolicyView
from scheduler.store.db import one_decider
from scheduler.store.models import Session, Status
from scheduler.store.policy import load_policy
from scheduler.store.sessions import is_spot
from scheduler.store.turn_reads import running_rows

log = logging.getLogger("pacer.admit")

CEILING_CHECK_JOB = "ceiling_check"  # one id: priority starts in one burst share one check

# Offers the room to the queue ranked ahead of a session the gate would admit; True when any of
# it started (`queue_pass.offer_ahead`).
Ahead = Callable[[Work, PolicyView, Session], bool]


def gate_decision(work: Work, policy: PolicyView, session: Session) -> Decision:
    work.db.flush()  # as a read would: a pending turn write drops the fleet's memo first
    snapshot = build_snapshot(work.db, work.ctx, policy, work.reading)
    # A session whose deliverer already flipped it to running is counted in the fleet itself.
    # The fleet's rows just read say whether this one runs: no second read for one row of them.
    running = any(sid == session.id for sid, *_ in running_rows(work.db))
    return decide(snapshot, asking_for(session, work.ctx, policy, running=running), work.now)


def refuse_bookkeeping(work: Work, session: Session, reason: str, said: Verdict) -> Submission:
    """Archive a bookkeeping session admission refused: no hold, no re-check, no queue."""
    session.status = Status.ARCHIVED.value
    session.updated_at = work.now
    work.db.add(session)
    if said.decision is not None and said.block is None and said.asleep is None:
        sentence = explain(said.decision, work.now).why
    else:
        sentence = said.hold_block(work.now).sentence
    work.effects.notice("refused", session_id=session.id, sentence=sentence)
    log.info("bookkeeping session #%s refused, not queued: %s", session.id, sentence)
    return Submission("refused", session.id or 0, reason=reason, sentence=sentence, decision=said.decision)


def admit(
    work: Work, session: Session, attempt: TurnAttempt, ahead: Ahead | None = None, *, wake: bool = False
) -> Submission:
    """Admit one turn, or hold it. `ahead`: the queue ranked ahead of this session goes first
    (a queue pass's own loop); None for the sweep's resume, which is itself the front of the
    queue, and for a person's direct start. `wake`: a wake still ahead holds the session first,
    as on every automatic path that wakes a population (seed 001, "A pause outranks precedence")."""
    with about_session(session.id):
        return _admit(work, session, attempt, ahead, wake)


def _admit(work: Work, session: Session, attempt: TurnAttempt, ahead: Ahead | None, wake: bool) -> Submission:
    db, ctx, now, effects = work.db, work.ctx, work.now, work.effects
    one_decider(db)  # held already where the decision began; late here is still under the lock
    policy = load_policy(db)
    if attempt.kind in PASS_THROUGH:
        turn = start(work, session, attempt)
        return Submission("started", session.id or 0, turn.id, reason="pass_through")
    if not is_spot(session, policy) and session.hold_reason in (Reason.AT_UTILIZATION_LIMIT, Reason.FLEET_AT_CAP):
        clear_hold(session)  # a hold a promotion has overtaken is a fossil: the class wins
    said = verdict(work, session, lambda: gate_decision(work, policy, session), wake=wake)
    if session.bookkeeping and not said.allowed:
        # Pacer's own bookkeeping is refused, never queued — by the gate, an operator hold or any
        # other check alike: a deferral would outlive its use (seed 001).
        return refuse_bookkeeping(work, session, said.hold_block(now).reason, said)
    if said.decision is None:  # its wake, or a check beyond the gate, holds it
        return hold(work, session, attempt, said.hold_block(now))
    decision = said.decision
    if decision.allowed and ahead is not None and not session.bookkeeping and ahead(work, policy, session):
        # What the queue ahead left is asked whole: a session it started may hold this one's
        # group or capacity now, not only its slot and its money.
        return admit(work, session, attempt)
    if decision.allowed:
        for hook in ctx.plugins.before_start:
            hook(work, session, decision)  # preemption lives here: it never raises
        turn = start(work, session, attempt)
        if decision.reason is Reason.PRIORITY and ctx.runtime(session.runtime).spends_quota:
            effects.alarm(CEILING_CHECK_JOB, now, alarms.CEILING_CHECK)  # its burn may carry spot work over the line
        return Submission("started", session.id or 0, turn.id, reason=decision.reason, decision=decision)
    return hold(work, session, attempt, said.hold_block(now), decision)
