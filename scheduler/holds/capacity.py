"""Weighted capacity and the deference window (seed 000, "Agent queued for a runner slot").

Each session claims `Session.weight` units of the slot budget (default 1.0). A zero weight adds
no load but still takes its queue turn: it waits only while the fleet is exactly full or
over-committed. The budget is the fleet's slots, min(max sessions, agent workers) — the very
number the gate counts — unless the session authored its own `Session.capacity` (a whole number
>= 1; 0 is refused at creation), which replaces it for that session's own admission: occupied
weighted load plus its own weight must fit within its own budget. `capacity=1` is the run-alone
barrier for a default-weight session. Or it authored a multiplier (`1.5x`,
`Session.capacity_multiplier`): its budget is that multiple of the fleet's slots, recalculated on
every pass, so 1.5x of 5 slots is 7.5 and follows the slots when an operator moves them.

Agreement with the gate: for the population the gate counts (spot, a runtime that spends
quota, gating on) the weighted claim is the gate's own slot check (`rules/gate.py`, through
`rules/slots.py`), so a session carries one reason, fleet_at_cap, and every surface shows the
load. This check binds what the gate does not count: an authored capacity binds a session of any
class, since it is that session's own request to run (nearly) alone.
A session that does not fit is skipped, never blocking the waiters behind it that do fit.

The deference window. Seed 000 ranks by a numeric priority, default 10, lower first, and holds
a deprioritized waiter (priority p > 10) back for min((p - 10) * 3, 60) seconds while a
better-ranked agent that has not yet parked is on its way — dependency-chained work arrives
seconds after its predecessor exits. Pacer's ranking is precedence, default 0, higher first, so
a spot session with precedence q < 0 is deprioritized by -q steps: it defers for up to
min(-q * 3, 60) seconds while a better-ranked session (any priority session, or a spot one with
higher precedence) has just arrived — created within that window, never started, not yet
parked on a hold. Pacer measures the window from the better session's arrival rather than from
the waiter's continuous eligibility (no per-session stamp to keep): either way the deference is
bounded by the window, ends early the moment no such arrival remains, and preempts nothing.
A full fleet is not a moment to defer in: the gate holds the waiter for the slot instead.

A claim, the rule that fits it and the fleet's load are in `scheduler/engine/claims.py`, which
the queue pass reads too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.bounds import check_claim
from scheduler.context import Context, request_queue_pass
from scheduler.engine.attempt import Block, is_manual
from scheduler.engine.claims import Claim, occupied
from scheduler.engine.records import lock
from scheduler.errors import Refused
from scheduler.rules.genesis import SchedulingClass
from scheduler.rules.slots import budget_for, fits
from scheduler.rules.snapshot import PolicyView
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Status
from scheduler.store.policy import load_policy
from scheduler.store.sessions import class_of, is_spot
from templates import error_text, render

log = logging.getLogger("pacer.capacity")

DEFAULT_PRECEDENCE = 0
SECONDS_PER_STEP = 3
DEFERENCE_CAP = timedelta(seconds=60)
REASON = "capacity"
DEFER_REASON = "deferring"


@dataclass(frozen=True)
class ClaimChange:
    """A change to a session's claim; a part left None stays as it is. Its own budget is one of
    a whole number (`capacity`), a multiplier, or the fleet's (`fleet_budget`: neither)."""

    weight: float | None = None
    capacity: int | None = None
    multiplier: float | None = None
    fleet_budget: bool = False


def change_claim(ctx: Context, session_id: int, change: ClaimChange, *, actor: str | None) -> dict[str, list[Any]]:
    """Set a session's weight and its own budget; every surface calls this. Returns what moved,
    field -> [before, after]. A claim that moved may let the session, or the waiters behind a
    running one, fit now: the queue looks again."""
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        session = lock(db, session_id)
        if session.status == Status.ARCHIVED.value:
            raise Refused(error_text("sessions/archived_claim", session_id=session_id))
        weight = session.weight if change.weight is None else change.weight
        own: tuple[int | None, float | None] = (session.capacity, session.capacity_multiplier)
        if change.fleet_budget:
            own = (None, None)
        elif change.capacity is not None or change.multiplier is not None:
            own = (change.capacity, change.multiplier)
        check_claim(weight, *own)
        before = {
            "weight": session.weight,
            "capacity": session.capacity,
            "capacity_multiplier": session.capacity_multiplier,
        }
        after = {"weight": weight, "capacity": own[0], "capacity_multiplier": own[1]}
        changed = {key: [before[key], after[key]] for key in before if before[key] != after[key]}
        if changed:
            session.weight, session.capacity, session.capacity_multiplier = weight, own[0], own[1]
            session.updated_at = now
            db.add(session)
    if changed:
        moved = ", ".join(f"{key} {old} -> {new}" for key, (old, new) in changed.items())
        log.info("session #%s claim changed by %s: %s", session_id, actor or "someone", moved)
        ctx.emit("claim_changed", session_id=session_id, actor=actor)  # its badges on every queue view
        request_queue_pass(ctx)
    return changed


def admission_check(ctx: Context) -> Callable[[DBSession, Session, datetime], Block | None]:
    def capacity_check(db: DBSession, session: Session, now: datetime) -> Block | None:
        policy = load_policy(db)
        gated = policy.gating_enabled and is_spot(session, policy) and ctx.runtime(session.runtime).spends_quota
        claim = Claim(session.weight, session.capacity, gated, session.capacity_multiplier)
        explicit = claim.explicit
        if gated or not explicit:
            return None  # the gate's slot check decides it
        budget_slots = policy.slots(ctx.limits.agent_workers)
        load, _count = occupied(db, ctx, exclude_id=session.id)
        if not claim.refused(load, budget_slots):
            return None
        budget = claim.budget(budget_slots)
        sentence = render(
            "text/capacity_block.j2",
            weight=session.weight,
            free=max(budget - load, 0.0),
            load=load,
            budget=budget,
            explicit=explicit,
            multiplier=session.capacity_multiplier if session.capacity is None else None,
            slots=budget_slots,
        )
        return Block(REASON, sentence, skip_only=True)

    return capacity_check


def deference_window(precedence: int) -> timedelta:
    """min((p - default) * 3, 60) seconds, with Pacer's precedence mapped onto seed 000's
    priority: p - 10 there is -(precedence) here. Zero at the default and above."""
    steps = DEFAULT_PRECEDENCE - precedence
    if steps <= 0:
        return timedelta(0)
    return min(timedelta(seconds=steps * SECONDS_PER_STEP), DEFERENCE_CAP)


def outranks(other: Session, session: Session, policy: PolicyView) -> bool:
    if class_of(other, policy) is SchedulingClass.PRIORITY:
        return True
    return other.precedence > session.precedence


def arrivals(db: DBSession, session: Session, policy: PolicyView, now: datetime, window: timedelta) -> list[Session]:
    """Better-ranked sessions just arrived: created within the window, never started, not parked."""
    stmt = select(Session).where(
        Session.status == Status.WAITING.value,
        col(Session.id) != session.id,
        col(Session.created_at) > now - window,
        col(Session.started_at).is_(None),
        col(Session.hold_reason).is_(None),
        col(Session.pause_reason).is_(None),
        col(Session.park_reason).is_(None),
    )
    return [
        s for s in db.exec(stmt) if outranks(s, session, policy) and not (s.wake_at is not None and s.wake_at > now)
    ]


def deference_check(ctx: Context) -> Callable[[DBSession, Session, datetime], Block | None]:
    def deference(db: DBSession, session: Session, now: datetime) -> Block | None:
        window = deference_window(session.precedence)
        if not window or is_manual():
            return None
        policy = load_policy(db)
        if not is_spot(session, policy):
            return None  # priority work never defers
        if policy.gating_enabled and ctx.runtime(session.runtime).spends_quota:
            load, _count = occupied(db, ctx, exclude_id=session.id)
            budget = budget_for(policy.slots(ctx.limits.agent_workers), session.capacity, session.capacity_multiplier)
            if not fits(load, session.weight, budget):
                return None  # not eligible: the gate holds it for the slot, and no window runs
        better = arrivals(db, session, policy, now, window)
        if not better:
            return None
        until = max(s.created_at for s in better) + window
        sentence = render(
            "text/deferring_block.j2", precedence=session.precedence, window=window, better=better, until=until
        )
        return Block(DEFER_REASON, sentence, retry_at=until, skip_only=True)

    return deference
