"""The budget ceiling sweep (seed 001, "The budget is a ceiling", "What brings it back",
"Precedence decides who gets the headroom back").

Admission alone makes the budget a floor under when new spot work stops; this sweep, every five
minutes, applies the same gate decision to work already running:

  the gate says                    running spot work
  spot_budget (stops_running_work) every quota-spending spot turn is paused: halted, recorded
  pacing_curve                     nothing — the pace only admits; the money is spent either way
  fleet_at_cap                     nothing — a running session already holds its slot
  anything else                    dormant paused sessions resume, highest precedence first,
                                   oldest pause within a tie, against a reserve widened by
                                   RESUME_MARGIN_PCT; at most MAX_RESUMES_PER_SWEEP a pass, never
                                   more than the free slots, and one when the pace was waived
                                   rather than passed

Priority sessions, runtimes that spend no quota and Pacer's own bookkeeping are never paused. A
sleeper promoted to priority resumes on the next pass whatever the windows say; one with a wake
still ahead is left alone. The same pass resolves preemption marks first (`preemption.resolve_marks`)
and, when nothing is paused, tells the running spot sessions once that a window's spot budget runs
out within PACER_NOTICE_MINUTES (`budget_notice`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlmodel import Session as DBSession
from sqlmodel import col, func, select

from scheduler.context import Context
from scheduler.engine.attempt import PASS_THROUGH, Work
from scheduler.engine.fleet import (
    asking_for,
    build_snapshot,
    burn_rate,
    fleet_columns,
    read_quota,
    running_fleet,
)
from scheduler.engine.pause import (
    AT_UTILIZATION_LIMIT,
    PAUSED_BY,
    PREEMPTED,
    USER_SPOT_QUEUE,
    dormant_paused,
    is_dormant_paused,
    record_pause,
    resume_paused,
)
from scheduler.engine.queue_pass import locked_unless_taken
from scheduler.engine.records import halt_turn
from scheduler.holds import cost_caps
from scheduler.pauses import budget_notice, preemption
from scheduler.rules.explain import explain
from scheduler.rules.gate import Ceiling, Decision, decide
from scheduler.rules.slots import TOLERANCE
from scheduler.rules.snapshot import Asking, PolicyView, Snapshot
from scheduler.rules.waiting import banner
from scheduler.store.db import deciding_scope
from scheduler.store.models import Session, Status
from scheduler.store.policy import load_policy
from scheduler.store.sessions import is_spot

log = logging.getLogger("pacer.ceiling")

SWEEP_INTERVAL = timedelta(minutes=5)
MAX_RESUMES_PER_SWEEP = 5
CANDIDATES_PER_PASS = 50  # bounds the pass; sessions past it keep their place for the next one


@dataclass
class SweepReport:
    paused: list[int] = field(default_factory=list)
    resumed: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)  # a wake still ahead, or a block of their own
    deferred: list[int] = field(default_factory=list)  # past this pass's batch: first in the next
    ceiling: Ceiling | None = None
    batch: int = 0  # how many spot resumes this pass allowed
    waived: bool = False  # the batch was narrowed to one because the pace was waived
    marks: preemption.MarkReport = field(default_factory=preemption.MarkReport)
    capped: list[int] = field(default_factory=list)  # halted at their cost cap
    noticed: list[int] = field(default_factory=list)  # told their window's spot budget runs out soon


def ceiling_sweep(ctx: Context) -> SweepReport:
    now = ctx.clock.now()
    reading = read_quota(ctx, now)
    report = SweepReport()
    with deciding_scope(ctx.engine) as db:
        work = Work(db, ctx, now, reading=reading)
        policy = load_policy(db)
        report.marks = preemption.resolve_marks(db, ctx, policy, now, work.effects)
        _pause_running(work, policy, report)
        # Any session's cost cap, priority or spot: the ceiling's own pauses are halted already.
        report.capped = cost_caps.halt_capped(work, skip=report.paused)
        _notice_ending(work, policy, report)
        _resume_dormant(work, policy, report)
    work.effects.apply(ctx)
    if report.paused or report.resumed:
        log.info("ceiling sweep: paused %s, resumed %s", report.paused, report.resumed)
    return report


def ceiling_check(ctx: Context) -> SweepReport:
    """The sweep's pause, asked at once: a priority turn that spends quota has just started, and
    its burn may carry the running spot work's projected spend over a window's spot budget
    before the next sweep (P15: the budget is a ceiling the spot work never crosses, not one it
    crosses by up to a sweep of burn). Only the pause: resumes and marks wait for the sweep."""
    now = ctx.clock.now()
    reading = read_quota(ctx, now)
    report = SweepReport()
    with deciding_scope(ctx.engine) as db:
        work = Work(db, ctx, now, reading=reading)
        _pause_running(work, load_policy(db), report)
    work.effects.apply(ctx)
    if report.paused:
        log.info("ceiling check after a priority start: paused %s", report.paused)
    return report


def is_pausable(session: Session, ctx: Context, policy: PolicyView, turn_kind: str) -> bool:
    """Only quota-spending spot work: priority is never paused, nor a runtime that spends
    nothing against the windows, nor Pacer's own seconds-long bookkeeping."""
    return (
        is_spot(session, policy)
        and ctx.runtime(session.runtime).spends_quota
        and not session.bookkeeping
        and turn_kind not in PASS_THROUGH
    )


def _pause_running(work: Work, policy: PolicyView, report: SweepReport) -> None:
    db, ctx, now, effects = work.db, work.ctx, work.now, work.effects
    snapshot = build_snapshot(db, ctx, policy, work.reading)
    if not any(
        _stopped(snapshot, ctx, sid, runtime, now) for sid, spot, runtime, _weight in fleet_columns(db, policy) if spot
    ):
        return  # nothing running would be paused: the whole rows are not read
    pausable = [(s, t) for s, t in running_fleet(db, ctx, policy) if is_pausable(s, ctx, policy, t.kind)]
    for session, turn in pausable:
        # The same question admission asks, for a session that is already running: it is
        # counted in the fleet itself, so the slot check is skipped and only the money decides.
        decision = decide(snapshot, asking_for(session, ctx, policy, running=True), now)
        if not decision.stops_running_work:
            continue  # the pace and the slots only admit; they never interrupt
        report.ceiling = decision.ceiling
        why = explain(decision, now).why
        if session.preempt_mark_at is not None:
            session.last_preempted_at = session.preempt_mark_at  # the mark is taken, not released
            session.preempt_mark_at = None
        record_pause(session, AT_UTILIZATION_LIMIT, why, now, costs=True)
        session.pending_sleep = True  # a turn that ends on its own before the halt lands still sleeps
        db.add(session)
        halt_turn(work, turn)
        sentence = banner(session, now)
        effects.notice(
            "paused", session_id=session.id, reason=AT_UTILIZATION_LIMIT, sentence=sentence, title=session.title
        )
        log.warning("session #%s paused mid-run: %s", session.id, sentence)
        report.paused.append(session.id or 0)
    db.flush()


def _notice_ending(work: Work, policy: PolicyView, report: SweepReport) -> None:
    """Tell the running spot sessions the ceiling would pause that a window's spot budget runs
    out soon (`scheduler.pauses.budget_notice`): the first window to run out is the one that pauses them."""
    if report.paused:
        return  # the ceiling stops running work now: its own pause notice says so
    ending = budget_notice.ending_now(work, policy, work.ctx.limits.notice_minutes)
    if not ending:
        return
    db, ctx = work.db, work.ctx
    capped = set(report.capped)  # halted at their cost cap in this pass: the budget will not pause them
    pausable = [
        s.id or 0
        for s, t in running_fleet(db, ctx, policy)
        if is_pausable(s, ctx, policy, t.kind) and s.id not in capped
    ]
    report.noticed = budget_notice.tell(work, pausable, ending[0])


def _stopped(snapshot: Snapshot, ctx: Context, session_id: int, runtime: str, now: datetime) -> bool:
    """Would the ceiling stop this running spot turn? The question `_pause_running` asks, from
    the fleet's columns."""
    spends = ctx.runtime(runtime).spends_quota
    asking = Asking(
        session_id=session_id,
        is_spot=True,
        already_running=True,
        spends_quota=spends,
        burn_per_min=burn_rate(ctx, runtime),
    )
    return spends and decide(snapshot, asking, now).stops_running_work


def waived_not_passed(decision: Decision) -> bool:
    """True when the idle-fleet waiver let the session through a pace it would have failed."""
    return decision.waiver_applied and not all(w.pace_passed for w in decision.windows)


def _quota_load(db: DBSession, ctx: Context, policy: PolicyView) -> float:
    """The slot budget's load: the weighted claims of the running turns the gate counts."""
    return sum(
        max(weight, 0.0)
        for _sid, _spot, runtime, weight in fleet_columns(db, policy)
        if ctx.runtime(runtime).spends_quota
    )


@dataclass
class ResumeBatch:
    """How many spot sessions one sweep resumes (seed 001, "What brings it back"): never more
    than MAX_RESUMES_PER_SWEEP nor the free slots; one when the first went back on the idle-fleet
    waiver rather than a passed pace, since the waiver's contract is a duty cycle, not a burst;
    and none after the fleet refuses one, since the budget, the pace and the slots are the
    fleet's and whoever is behind would be refused the same. Pure: the sweep reports each
    outcome and asks `has_room` before the next."""

    size: int
    resumed: int = 0
    stopped: bool = False
    waived: bool = False

    @classmethod
    def for_free_slots(cls, free: int) -> ResumeBatch:
        return cls(size=max(min(MAX_RESUMES_PER_SWEEP, free), 0))

    def has_room(self) -> bool:
        return not self.stopped and self.resumed < self.size

    def resumed_one(self, *, pace_waived: bool) -> None:
        self.resumed += 1
        if self.resumed == 1 and pace_waived:
            self.size, self.waived = 1, True

    def refused_by_fleet(self) -> None:
        self.stopped = True


def _resume_dormant(work: Work, policy: PolicyView, report: SweepReport) -> None:
    db, ctx, now = work.db, work.ctx, work.now
    slots = policy.slots(ctx.limits.agent_workers)
    # Room for a whole default claim or part of one: the gate asks each resume's own weight.
    batch = ResumeBatch.for_free_slots(math.ceil(slots - _quota_load(db, ctx, policy) - TOLERANCE))
    for dormant in dormant_paused(db, policy, CANDIDATES_PER_PASS):
        sid = dormant.id
        if dormant.wake_at is not None and dormant.wake_at > now:
            report.held.append(sid)  # asleep: its wake is its next event; nothing starts it before then
            continue
        if dormant.spot and not batch.has_room():
            report.deferred.append(sid)
            continue
        session = locked_unless_taken(db, sid)
        if session is None or not is_dormant_paused(session):
            continue  # a queue pass has it, or resumed it since the list was read (PostgreSQL)
        if not dormant.spot:
            # Priority work is never gated on quota: a promoted sleeper goes now, outside the batch.
            if resume_paused(work, session).started:
                report.resumed.append(sid)
            else:
                report.held.append(sid)
            continue
        outcome = resume_paused(work, session)
        if outcome.started:
            report.resumed.append(sid)
            batch.resumed_one(pace_waived=outcome.decision is not None and waived_not_passed(outcome.decision))
        elif outcome.decision is not None:
            report.held.append(sid)
            batch.refused_by_fleet()
        else:
            report.held.append(sid)  # a block of its own (an operator hold, its group): skip it
    report.batch, report.waived = batch.size, batch.waived


def paused_figures(db: DBSession) -> dict[str, int]:
    """The counts the surfaces print: what the ceiling cost (asleep), what priority work took
    (preempted, and marks still standing) and what people parked on purpose (parked)."""
    rows = db.exec(
        select(Session.pause_reason, func.count())
        .where(Session.status == Status.WAITING.value, Session.paused_by == PAUSED_BY)
        .group_by(Session.pause_reason)
    ).all()
    by_reason = {reason: int(n) for reason, n in rows}
    marked = db.exec(select(func.count()).select_from(Session).where(col(Session.preempt_mark_at).is_not(None))).one()
    return {
        "asleep": by_reason.get(AT_UTILIZATION_LIMIT, 0) + by_reason.get(PREEMPTED, 0),
        "preempted": by_reason.get(PREEMPTED, 0),
        "marked": int(marked),
        "parked": by_reason.get(USER_SPOT_QUEUE, 0),
    }
