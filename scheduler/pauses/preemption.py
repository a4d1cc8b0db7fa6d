"""A priority session takes a slot (seed 001, "A priority session takes a slot", "Who yields",
"The pause is graceful, and often free", "It joins the queue that already exists", "Turning it off").

Evaluated where every quota-spending turn is admitted (`ctx.plugins.before_start`): a priority start
into a full fleet marks one running spot session to yield its slot, instead of the fleet running
one wider than Max sessions. Full means running quota-spending turns, less the marks already
standing, at or above the effective slots — a marked session keeps its turn, and so its place in
the count, for the whole grace window, and without the subtraction a priority session taking a
follow-up every couple of minutes would take a fresh victim for the same slot each time.

Who yields is the spot queue read backwards: lowest precedence; ties by fewest prior
preemptions (a durable ledger), least human involvement, newest. Never one already asked to
sleep, never one carrying any pause record, never one preempted within COOLDOWN.

The mark is graceful: the pause record and pending_sleep are written while the victim runs, and
its own turn end sleeps it into the spot queue (`completion.settle`). The ceiling sweep resolves the
marks each pass (`resolve_marks`). Preemption is called from the gate, whose whole promise is
that it only defers: it never raises and never holds anything.

The ledger: `preemption_count` is charged when the mark is made and `last_preempted_at` (the
cooldown) when the mark is taken — the victim slept or was halted. A mark released because the
fleet came back under its cap un-charges the count, so it costs neither a recorded preemption
nor a cooldown. A resume deliberately clears neither. Each charge is also a row of
`preemption_ledger`, which says when and to whom: what the cycling report counts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session as DBSession
from sqlmodel import col, func, select

from scheduler.context import Context
from scheduler.engine.attempt import PASS_THROUGH, Work
from scheduler.engine.effects import Effects
from scheduler.engine.fleet import fleet_columns, running_fleet
from scheduler.engine.pause import COOLDOWN, PREEMPTED, is_standing, record_pause, release_mark
from scheduler.engine.records import clear_pause, halt_turn, is_running, last_turn, running_turn
from scheduler.rules.gate import Decision, Reason
from scheduler.rules.slots import fits, is_full
from scheduler.rules.snapshot import PolicyView
from scheduler.rules.waiting import banner
from scheduler.store import preemption_ledger
from scheduler.store.models import EnqueuedMessage, HumanMessage, Session, Status, Turn
from scheduler.store.policy import load_policy
from scheduler.store.sessions import is_spot
from scheduler.store.turn_reads import running_marks
from templates import render

log = logging.getLogger("pacer.preemption")

GRACE = timedelta(minutes=10)
STALE_MARK_AGE = timedelta(hours=1)


@dataclass
class MarkReport:
    slept: list[int] = field(default_factory=list)  # its turn ended: now dormant in the queue
    finished: list[int] = field(default_factory=list)  # its turn ended with nothing left to resume
    released: list[int] = field(default_factory=list)  # the fleet came back under its cap
    stale: list[int] = field(default_factory=list)  # older than STALE_MARK_AGE: provenance broke
    halted: list[int] = field(default_factory=list)  # past GRACE and still at cap


def _quota_fleet(
    db: DBSession, ctx: Context, policy: PolicyView, *, excluding: int | None = None
) -> list[tuple[Session, Turn]]:
    """What the gate counts: every running turn of a runtime that spends quota, any class."""
    return [
        (s, t) for s, t in running_fleet(db, ctx, policy)
        if ctx.runtime(s.runtime).spends_quota and s.id != excluding
    ]


def _quota_rows(
    db: DBSession, ctx: Context, policy: PolicyView, excluding: int | None
) -> list[tuple[int, bool, float]]:
    """(session id, is spot, weight) for `_quota_fleet`'s turns, from the fleet's columns that
    every decision reads anyway: the load decides whether anything must yield, and most starts
    find room without loading a single whole row."""
    return [
        (sid, spot, max(weight, 0.0)) for sid, spot, runtime, weight in fleet_columns(db, policy)
        if ctx.runtime(runtime).spends_quota and sid != excluding
    ]


def _yield_fleet(db: DBSession, ctx: Context, wanted: list[int], excluding: int | None) -> list[tuple[Session, Turn]]:
    """The whole rows of `_quota_fleet` that can matter in a full fleet: a spot session (who
    may yield) or one carrying a mark (who may be standing). Every other row only counts."""
    stmt = (
        select(Session, Turn)
        .join(Turn, col(Turn.session_id) == col(Session.id))
        .where(Turn.status == "running", col(Session.id).in_(wanted))
    )
    return [(s, t) for s, t in db.exec(stmt) if ctx.runtime(s.runtime).spends_quota and s.id != excluding]


def is_eligible(session: Session, turn: Turn, ctx: Context, policy: PolicyView, now: datetime) -> bool:
    if not is_spot(session, policy) or session.bookkeeping or turn.kind in PASS_THROUGH:
        return False
    if session.pending_sleep or session.pause_reason is not None or session.preempt_mark_at is not None:
        return False  # already asked to sleep: its slot is on its way back without anyone taking it
    return session.last_preempted_at is None or now - session.last_preempted_at >= COOLDOWN


def human_involvement(db: DBSession, session_ids: list[int]) -> dict[int, int]:
    if not session_ids:
        return {}
    rows = db.exec(
        select(HumanMessage.session_id, func.count())
        .where(col(HumanMessage.session_id).in_(session_ids))
        .group_by(col(HumanMessage.session_id))
    ).all()
    return {int(sid): int(n) for sid, n in rows}


def rank_victims(candidates: list[Session], involvement: dict[int, int]) -> list[Session]:
    """The spot queue read backwards: lowest precedence; then fewest prior preemptions (spread
    the cost), least human involvement (a conversation is the last to lose its turn), newest
    (least in flight to lose). Pure; the first is who yields."""
    return sorted(
        candidates,
        key=lambda s: (
            s.precedence,
            s.preemption_count,
            involvement.get(s.id or 0, 0),
            -s.created_at.timestamp(),
            -(s.id or 0),
        ),
    )


def before_start(work: Work, session: Session, decision: Decision) -> None:
    """The `before_start` hook. Never raises: every failure is logged and the start goes on."""
    db, ctx, now, effects = work.db, work.ctx, work.now, work.effects
    if decision.reason is not Reason.PRIORITY:
        return  # a spot start only ever takes a free slot: nothing to decide, nothing to read
    notices: list[tuple[str, dict[str, Any]]] = []
    try:
        with db.begin_nested():
            _preempt(db, ctx, session, now, notices)
    except Exception:
        log.exception("preemption for session #%s failed; the start goes on without it", session.id)
        return
    for event, context in notices:
        effects.notice(event, **context)


def _preempt(
    db: DBSession, ctx: Context, session: Session, now: datetime, notices: list[tuple[str, dict[str, Any]]]
) -> None:
    policy = load_policy(db)
    if is_spot(session, policy) or not ctx.runtime(session.runtime).spends_quota:
        return  # a spot start only takes a free slot; a runtime that spends nothing takes none
    if not policy.preemption_enabled or not policy.gating_enabled:
        return  # switched off (or no ceiling to keep): the fleet runs one over, as it did before
    rows = _quota_rows(db, ctx, policy, session.id)
    slots = policy.slots(ctx.limits.agent_workers)
    load = sum(weight for _sid, _spot, weight in rows)
    if fits(load, session.weight, float(slots)):
        return  # its claim fits in the slot budget (standing marks could only free more)
    marks = running_marks(db)
    wanted = [sid for sid, spot, _weight in rows if spot or sid in marks]
    fleet = _yield_fleet(db, ctx, wanted, session.id) if wanted else []
    running = len(rows)
    standing = sum(max(s.weight, 0.0) for s, _t in fleet if is_standing(s))
    if fits(load - standing, session.weight, float(slots)):
        return  # room is already promised by a standing mark
    turns = {s.id: t for s, t in fleet}
    candidates = [s for s, t in fleet if is_eligible(s, t, ctx, policy, now)]
    victim = None
    for candidate in rank_victims(candidates, human_involvement(db, [s.id or 0 for s in candidates])):
        # Lock and re-read: a priority start racing this one may have marked it meanwhile.
        db.refresh(candidate, with_for_update=True)
        if is_eligible(candidate, turns[candidate.id], ctx, policy, now):
            victim = candidate
            break
    if victim is None:
        log.info(
            "priority session #%s starts into a full fleet (%s of %s) with no eligible spot session to yield: the "
            "fleet runs one over",
            session.id,
            running,
            slots,
        )
        notices.append(("preempt_none", {"session_id": session.id, "running": running, "slots": slots}))
        return
    victim.preempt_mark_at = now
    victim.preempted_by_id = session.id
    victim.preemption_count += 1
    victim.pending_sleep = True
    preemption_ledger.record(db, victim, session, turns.get(victim.id), now)
    detail = render("text/preempted.j2", by=session.id, by_title=session.title, slots=slots, running=running)
    record_pause(victim, PREEMPTED, detail, now, costs=True)
    db.add(victim)
    db.flush()
    log.warning("session #%s marked to yield its slot to priority session #%s: %s", victim.id, session.id, detail)
    notices.append(("preempt_marked", {"session_id": victim.id, "by": session.id, "sentence": banner(victim, now)}))


def resolve_marks(db: DBSession, ctx: Context, policy: PolicyView, now: datetime, effects: Effects) -> MarkReport:
    """The ceiling sweep's pass over the marks, oldest first (seed 001's table):

      the turn ended, still marked      slept into the queue (or, nothing left to run, finished)
      older than STALE_MARK_AGE         released, whatever the fleet says
      fleet back under its cap          released, and the ledger un-charged
      past GRACE, still at or over cap  halted where it stands, as a budget pause halts one
      inside its grace                  left alone

    "The fleet" is every quota-spending turn a worker runs, the marked victim's included, against
    the effective slots. Strictly under: the victim fits, the preemption was never needed. At the
    cap is not under: a priority session between two follow-ups still runs the fleet at its cap
    the moment it speaks again, and releasing there would re-mark and release the same victim on
    every exchange without the fleet ever converging back to the operator's number.
    """
    report = MarkReport()
    marked = list(
        db.exec(select(Session).where(col(Session.preempt_mark_at).is_not(None)).order_by(col(Session.preempt_mark_at)))
    )
    if not marked:
        return report
    slots = policy.slots(ctx.limits.agent_workers)
    # Every quota-spending turn a worker runs, the marked ones included: a marked session keeps
    # its turn and so its place in the count. At or over the cap, the slot is still wanted.
    quota_fleet = _quota_fleet(db, ctx, policy)
    running = len(quota_fleet)
    load = sum(max(s.weight, 0.0) for s, _t in quota_fleet)
    for session in marked:
        sid = session.id or 0
        assert session.preempt_mark_at is not None
        turn = running_turn(db, sid)
        if turn is None or not is_standing(session):
            _settle_taken(db, session, now, effects, report)
            continue
        age = now - session.preempt_mark_at
        if age > STALE_MARK_AGE:
            release_mark(db, session, uncharge=False)
            report.stale.append(sid)
            log.warning("session #%s: its preemption mark is %s old, so its provenance broke; released", sid, age)
        elif not is_full(load, slots):
            release_mark(db, session, uncharge=True)
            report.released.append(sid)
            log.warning(
                "session #%s: the fleet is back under its cap (%s of %s running); its preemption mark is released and "
                "un-charged",
                sid,
                running,
                slots,
            )
            effects.notice("preempt_released", session_id=sid)
        elif age > GRACE:
            preemption_ledger.halted(db, session)
            session.last_preempted_at = session.preempt_mark_at
            session.preempt_mark_at = None
            halt_turn(Work(db, ctx, now, effects), turn)
            running -= 1
            report.halted.append(sid)
            sentence = banner(session, now)
            log.warning(
                "session #%s halted: past its %s grace with the fleet still at its cap (%s of %s) — %s",
                sid,
                GRACE,
                running + 1,
                slots,
                sentence,
            )
            effects.notice("paused", session_id=sid, reason=PREEMPTED, sentence=sentence, title=session.title)
        db.add(session)
    db.flush()
    return report


def _settle_taken(db: DBSession, session: Session, now: datetime, effects: Effects, report: MarkReport) -> None:
    """The victim's turn has ended (or something else took the session over): the mark is taken.
    Its turn end normally slept it already; the only thing left may be the transition."""
    sid = session.id or 0
    session.last_preempted_at = session.preempt_mark_at
    session.preempt_mark_at = None
    if session.pause_reason != PREEMPTED:
        return  # the pause was consumed (a person started it again): only the ledger remains
    if session.status in (Status.FAILED.value, Status.BLOCKED.value, Status.ARCHIVED.value):
        clear_pause(session)  # its own problem owns it now; there is nothing to resume
        return
    if is_running(db, sid):
        return
    previous = last_turn(db, sid)
    pending = session.hold_reason is not None or db.exec(
        select(EnqueuedMessage.id).where(EnqueuedMessage.session_id == sid, col(EnqueuedMessage.delivered_at).is_(None))
    ).first() is not None
    if previous is not None and previous.status == "done" and not pending:
        # It finished its turn in full and nothing is waiting behind it: the preemption cost
        # nothing and left nothing to resume. A nudge would only spend a turn.
        clear_pause(session)
        session.status = Status.DONE.value
        session.finished_at = session.finished_at or now
        report.finished.append(sid)
        return
    session.status = Status.WAITING.value
    session.pending_sleep = False
    report.slept.append(sid)
