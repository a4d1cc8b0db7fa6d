"""The queue pass: whenever something could free work (a turn ending, a release, a policy change,
a held session's alarm), the queue looks again, and precedence, not the timing of one session's
alarm, decides who takes a freed slot (seed 001, "Precedence", "A pause outranks precedence";
seed 000, "non-fitting waiters are skipped").

The same order holds on every path a turn takes: a spot turn the gate would admit first offers the room to the
spot work ranked ahead of it (`offer_ahead`), and a session the scheduler paused mid-run keeps its
place at the front of the queue — a pass resumes it, through the sweep's own resume and its margin, before held
work of its rank or below. A person's StartNow is the exception: it ignores position order
(seed 002).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from datetime import datetime

from sqlalchemy import bindparam
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col

from scheduler import alarms
from scheduler.context import Context
from scheduler.engine import claims
from scheduler.engine.admit import admit
from scheduler.engine.attempt import Block, Submission, TurnAttempt, Work, is_manual
from scheduler.engine.candidates import PAGE, Candidate, Passed, outranks, page
from scheduler.engine.fleet import read_quota
from scheduler.engine.pass_gate import PassGate
from scheduler.engine.pause import Dormant, first_paused, is_dormant_paused, resume_paused
from scheduler.engine.records import hold, hold_job_id, is_asleep, is_copy, lock, locked_copy, replay, start
from scheduler.engine.verdict import verdict
from scheduler.rules import failures
from scheduler.rules.gate import RESUME_MARGIN_PCT, Decision, Reason
from scheduler.rules.slots import is_full
from scheduler.rules.snapshot import PolicyView
from scheduler.store.db import deciding_scope
from scheduler.store.hold_reads import any_hold_store_in_use
from scheduler.store.models import Session, Status
from scheduler.store.policy import load_policy
from scheduler.store.sessions import is_spot

log = logging.getLogger("pacer.queue_pass")

PAGE_LIMIT = 20  # pages read per pass: with `EXAMINE_LIMIT`, bounds the cost of a pass
EXAMINE_LIMIT = 25  # candidates read whole and asked every check, per pass
GLOBAL_REASONS = frozenset({Reason.FLEET_AT_CAP})


# Rows a pass acts on are locked, skipping any another transaction holds (PostgreSQL; SQLite's
# BEGIN IMMEDIATE already serialises writers): two passes — a requested pass, an alarm, a turn arriving —
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


def is_dormant_hold(session: Session, now: datetime) -> bool:
    """Holding a turn for the queue, and nothing else owns it: not paused, parked or asleep."""
    return (
        session.hold_reason is not None
        and session.pause_reason is None
        and session.park_reason is None
        and not is_asleep(session, now)
    )


def _still_held(session: Session, now: datetime) -> bool:
    """Still a dormant held session once locked: read before the lock, it may have started since."""
    return session.status == Status.WAITING.value and is_dormant_hold(session, now)


def _is_due(session: Session, now: datetime) -> bool:
    if session.status == Status.ARCHIVED.value:
        log.info("session #%s is archived: its re-check stops here", session.id)
        return False
    if session.hold_reason is None:
        return False
    if is_asleep(session, now):
        log.info("session #%s is asleep until %s: its re-check stands down", session.id, session.wake_at)
        return False
    return is_dormant_hold(session, now)


def _retry_floor(session: Session, now: datetime) -> datetime | None:
    """When a failed turn held on its retry backoff may be asked again, while that time has not
    come; else None (seed 002: six attempts are attempts over time)."""
    at = session.hold_retry_at
    return at if session.hold_reason in failures.RETRY_HOLD_REASONS and at is not None and at > now else None


def _stops(decision: Decision) -> bool:
    """A full fleet or a spent budget holds everyone behind too; a pace hold may be this
    session's own burn, so smaller work behind it is still asked, and so may a claim that does
    not fit while the fleet has room left: a smaller weight behind it may (seed 000, non-fitting
    waiters are skipped). A session whose authored capacity is above the fleet's slots is asked
    at its own re-check when a full fleet ends the pass."""
    if decision.reason in GLOBAL_REASONS:
        return is_full(decision.fleet_load, decision.slots)
    return decision.stops_running_work


def _restates(session: Session, block: Block) -> bool:
    """A candidate that is not due keeps its alarm — unless its record no longer says why it
    waits (another check holds it now) or the block's own time comes before that alarm."""
    if session.hold_reason != block.reason:
        return True
    return block.retry_at is not None and (session.hold_retry_at is None or block.retry_at < session.hold_retry_at)


class _Pass:
    """One walk down the queue inside one transaction: what it has started so far, the gate it
    asks, and what it knows cannot start without asking (a full group, a claim that does not fit)."""

    def __init__(self, work: Work, policy: PolicyView) -> None:
        self.work, self.policy = work, policy
        self.gate = PassGate(work, policy)
        self.started: list[int] = []
        self.examined = 0
        self.paced: set[str] = set()  # runtimes whose spot sessions the gate refused this pass
        self._occupancy: dict[str, int] | None = None
        self._limits: dict[int, int] | None = None

    def _groups(self) -> tuple[dict[str, int], dict[int, int]]:
        if self._occupancy is None:
            self._occupancy = claims.occupancy(self.work.db, self.work.now)
        if self._limits is None:
            self._limits = claims.declared_limits(self.work.db)
        return self._occupancy, self._limits

    def _started(self, session_id: int) -> None:
        self.started.append(session_id)
        self.gate.fleet_changed()
        self._occupancy = None  # its group has one more claim now

    def cannot_start(self, cand: Candidate) -> bool:
        """From its columns alone: its group is full, or its weighted claim does not fit beside
        the fleet (seed 000: non-fitting waiters are skipped). Both only fill up during a pass."""
        group = cand.concurrency_group
        if group is not None:
            occupancy, limits = self._groups()
            if occupancy.get(group, 0) >= limits.get(cand.trigger_id or 0, claims.DEFAULT_LIMIT):
                return True
        ctx, policy = self.work.ctx, self.policy
        gated = policy.gating_enabled and cand.is_spot(policy) and ctx.runtime(cand.runtime).spends_quota
        claim = claims.Claim(cand.weight, cand.capacity, gated, cand.capacity_multiplier)
        if claim.gated:
            # The gate's own slot check, from the same columns: a claim that does not fit while
            # the fleet has room is this candidate's alone (a full fleet ends the pass instead).
            decision = self.gate.decide_for(cand)
            return decision.reason is Reason.FLEET_AT_CAP and not is_full(decision.fleet_load, decision.slots)
        if not claim.explicit:
            return False
        load, _count = claims.occupied(self.work.db, ctx)
        return claim.refused(load, policy.slots(ctx.limits.agent_workers))

    def queue(self) -> Iterator[Candidate]:
        """The held sessions in queue order, a page at a time; each page leaves out the rows read
        already and the waiters of the groups full now, so a long run of blocked work ahead costs
        a page read, not a fitting session's start."""
        passed = Passed()  # the first page leaves out nothing: most passes need no other
        for _ in range(PAGE_LIMIT):
            awake, ids = page(self.work.db, self.policy, self.work.now, PAGE, passed)
            yield from awake
            if len(ids) < PAGE:
                return
            occupancy, limits = self._groups()
            full = tuple(g for g, n in occupancy.items() if n >= claims.DEFAULT_LIMIT)
            passed = Passed((*passed.seen, *ids), full, tuple(limits), tuple(sorted(self.paced)))

    def attempt(self, session: Session, *, advance: bool) -> tuple[str, bool]:
        """Ask once for a held session. Returns (outcome, stop the pass?): "started", "held" by
        the gate, or "blocked" by a check beyond it."""
        work = self.work
        turn = replay(work.db, session)
        said = verdict(work, session, lambda: self.gate.decide(session))
        block = said.block
        if block is not None:
            if advance or _restates(session, block):
                # Held again as it was recorded: a held resume stays one (`records.replay`).
                hold(
                    work,
                    session,
                    TurnAttempt(session.hold_prompt, session.hold_attachments, session.hold_turn_kind or turn.kind),
                    block,
                )
            return "blocked", not block.skip_only
        decision = said.decision
        assert decision is not None
        if decision.allowed:
            if is_copy(session):
                # Refused a moment ago, admitted now (a burn table refreshed between the two asks):
                # a start changes the row, so it goes through the tracked one (locked already).
                session = lock(work.db, session.id or 0)
            for hook in work.ctx.plugins.before_start:
                hook(work, session, decision)
            start(work, session, turn)
            self.gate.fleet_changed()
            self._occupancy = None
            return "started", False
        if advance:
            held = TurnAttempt(session.hold_prompt, session.hold_attachments, turn.kind)
            hold(work, session, held, said.hold_block(work.now), decision)
        return "held", _stops(decision)

    def in_order(
        self,
        waiting: Iterable[Candidate],
        paused: Dormant | None,
        due: Session | None = None,
        due_session: int | None = None,
    ) -> Session | None:
        """Admit `waiting` (held sessions, in queue order) while the gate allows, the paused
        session first in the sweep's resume order (`paused`) in its place among them. Returns the due session if it was
        not reached."""
        db, now = self.work.db, self.work.now
        # With a hold store in use, a refused candidate is still read whole: its own check may
        # now say why it waits (an operator hold placed over it), and that is restated.
        restate = any_hold_store_in_use(db)
        for cand in waiting:
            if paused is not None and cand.is_spot(self.policy) and outranks(paused, cand):
                self.resume_first_paused(paused)
                paused = None
            if self.examined >= EXAMINE_LIMIT:
                break
            if due is not None and cand.id == due.id:
                due = None  # examined in its place in the queue
            elif cand.id != due_session:
                if self.cannot_start(cand):
                    continue
                if not restate:
                    decision = self.gate.decide_for(cand)
                    if not decision.allowed:  # the same answer every candidate asking alike gets
                        if _stops(decision):
                            break
                        if cand.is_spot(self.policy):
                            self.paced.add(cand.runtime)
                        continue
            session = locked_unless_taken(db, cand.id)
            if session is None or not _still_held(session, now):
                continue  # another transaction has it (PostgreSQL): it is that pass's to admit or re-hold
            outcome, stop = self.attempt(session, advance=cand.id == due_session)
            if outcome == "started":
                self.started.append(cand.id)
            if outcome != "blocked":
                # A check beyond the gate that holds a candidate (an operator hold, a prerequisite)
                # costs the pass no examination: thirty held sessions ranked above one that fits
                # must not end the walk before it (seed 000, "non-fitting waiters are skipped").
                # The page limit still bounds the rows a pass reads.
                self.examined += 1
            if stop:
                break
        if paused is not None:  # no held spot work ranked below it was examined
            self.resume_first_paused(paused)
        return due

    def resume_first_paused(self, paused: Dormant) -> None:
        """A session paused mid-run goes back before held spot work of its precedence or below
        takes the room (seed 001, "What brings it back": paused sessions keep their place at the
        front). Without this the ceiling sweep, every five minutes, finds the room a turn's end
        freed already taken by the held work that pass admitted, and a paused session can wait
        days. The resume is the sweep's own (`pause.resume_paused`): against the reserve widened
        by the resume margin, one per pass — a freed slot, not a batch."""
        if not self.gate.decide_for(paused, margin=RESUME_MARGIN_PCT).allowed:
            return  # the resume's own question, from columns: nothing is locked or rendered for a no
        session = locked_unless_taken(self.work.db, paused.id)
        if session is None or not is_dormant_paused(session):
            return  # another transaction has it, or resumed it a moment ago
        if resume_paused(self.work, session).started:
            self._started(paused.id)


def queue_pass(ctx: Context, *, due_session: int | None = None) -> list[int]:
    """One pass over the queue: admit held sessions in rank order while the gate allows.

    A session the gate refuses for a reason of its own (its burn, its group, an operator hold)
    is skipped, not allowed to block those behind it; a full fleet ends the pass. `due_session`
    is the session whose alarm fired: if it is not admitted its ladder advances and it is
    re-armed; others keep their alarms.
    """
    now = ctx.clock.now()
    reading = read_quota(ctx, now)
    with deciding_scope(ctx.engine) as db:
        work = Work(db, ctx, now, reading=reading)
        walk = _Pass(work, load_policy(db))
        due = locked_copy(db, due_session) if due_session is not None else None
        retry_at = _retry_floor(due, now) if due is not None else None
        if due is not None and retry_at is not None:
            # Woken early (a wake, a hand-run alarm): the retry's time is a floor. Its own
            # alarm goes back at that time, since one that fired while it slept stood down.
            work.effects.alarm(hold_job_id(due.id or 0), retry_at, alarms.RECHECK, due.id)
            due = None
        if due is not None and not _is_due(due, now):
            due = None
        waiting: Iterable[Candidate] = ()
        paused = None
        if due is not None and not walk.gate.decide(due).allowed:
            # The gate refuses the session whose alarm fired: its ladder advances and the queue
            # is not scanned. Those asking otherwise (priority, a smaller burn) have alarms of
            # their own, and whatever frees room (a turn ending, a release, a policy change)
            # asks for a full pass.
            if walk.attempt(due, advance=True)[0] == "started":
                walk.started.append(due.id or 0)  # refused, then admitted on the second ask
            due = None
        else:
            if due is not None:
                due = db.get(Session, due.id)  # it may start: the tracked row (locked above)
            waiting = walk.queue()
            paused = first_paused(db, walk.policy, now)
            due = walk.in_order(waiting, paused, due, due_session)
        if due is not None:  # beyond the examined slice, or the pass stopped above it
            walk.attempt(due, advance=True)
    work.effects.apply(ctx)
    return walk.started


def offer_ahead(work: Work, policy: PolicyView, session: Session) -> bool:
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
    paused = first_paused(work.db, policy, work.now)
    if paused is not None and (paused.id == session.id or not outranks(paused, session)):
        paused = None
    walk = _Pass(work, policy)
    walk.in_order(_ahead(walk.queue(), policy, session), paused)
    return bool(walk.started)


def _ahead(queue: Iterable[Candidate], policy: PolicyView, session: Session) -> Iterator[Candidate]:
    """The spot candidates ranked ahead of `session`: the queue is in rank order, so the first
    spot candidate it outranks ends them."""
    for cand in queue:
        if cand.id == session.id or not cand.is_spot(policy):
            continue
        if not outranks(cand, session):
            return
        yield cand


def admit_in_queue(work: Work, session: Session, attempt: TurnAttempt) -> Submission:
    """Admit one turn at its place in the queue: the work ranked ahead of it goes first."""
    return admit(work, session, attempt, ahead=offer_ahead)


def recheck(ctx: Context, session_id: int) -> list[int]:
    """The alarm of one held session: the queue looks again, this session among it."""
    return queue_pass(ctx, due_session=session_id)
