"""Cost budgets (seed 002, "The holds", row "Cost budget"): an operator sets a budget in US
dollars per runtime (the provider a session's turns spend on) on the policy row. This
deployment's estimated spend on a runtime is the recorded cost of its finished turns since that
runtime's last spend reset (`Policy.spend_reset_at`; never reset: all of them). When the picked
session's runtime has spent its budget, the session is not started and the queue holds with the
cost-budget reason, naming the provider and the amount spent and saying to reset the spend.

No Resume: it would re-apply at once. Resetting the spend (`reset_spend`) or changing the budget
(`policy.set_policy`) asks for a queue pass, which starts the held sessions and lifts the hold.
The hold reports the provider's state on the whole queue's banner; each session of that runtime is
held by its own check, and sessions of other runtimes keep running, since they spend nothing of
that provider's budget. A person's press (start now) is not gated by it, as the seed says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session as DBSession
from sqlmodel import select

from scheduler.context import Context, request_queue_pass
from scheduler.engine.attempt import Block, is_manual
from scheduler.engine.effects import Effects
from scheduler.errors import InvalidInput
from scheduler.holds import queue as queue_holds
from scheduler.rules.snapshot import PolicyView
from scheduler.store.db import session_scope
from scheduler.store.hold_reads import any_queue_holds
from scheduler.store.models import PolicyAudit, Session, Status
from scheduler.store.policy import change_policy, ensure_policy, load_policy
from scheduler.store.turn_reads import runtime_spend
from templates import error_text, render

REASON = queue_holds.COST_BUDGET


@dataclass(frozen=True)
class Spend:
    """One runtime's spend against its budget, as the hold and `policy` show it."""

    runtime: str
    spent: float
    budget: float | None
    since: datetime | None  # the last reset; None: every turn counts

    @property
    def is_over(self) -> bool:
        return self.budget is not None and self.spent >= self.budget


def spend_of(db: DBSession, policy: PolicyView, runtime: str) -> Spend:
    since = policy.spend_reset_at.get(runtime)
    return Spend(runtime, runtime_spend(db, runtime, since), policy.cost_budgets.get(runtime), since)


def spends(db: DBSession, policy: PolicyView, runtimes: list[str]) -> list[Spend]:
    """Each named or budgeted runtime's spend, by name."""
    return [spend_of(db, policy, r) for r in sorted(set(runtimes) | set(policy.cost_budgets))]


def admission_check(ctx: Context) -> Callable[[DBSession, Session, datetime], Block | None]:
    def budget_check(db: DBSession, session: Session, now: datetime) -> Block | None:
        if is_manual():  # a person's press is not gated by the cost budget (seed 002)
            return None
        policy = load_policy(db)
        if session.runtime not in policy.cost_budgets:
            return None
        spend = spend_of(db, policy, session.runtime)
        if not spend.is_over:
            return None
        return Block(REASON, render("text/cost_budget_block.j2", spend=spend), skip_only=True)

    return budget_check


# --------------------------------------------------------------------------- the queue hold


def _held_runtimes(db: DBSession) -> set[str]:
    """The runtimes of the sessions the last admission held for their budget."""
    stmt = (
        select(Session.runtime).where(Session.status == Status.WAITING.value, Session.hold_reason == REASON).distinct()
    )
    return {str(r) for r in db.exec(stmt).all()}


def reconcile(ctx: Context) -> None:
    """Record, update or lift the cost-budget hold (announced once when new): held while a session
    waits on a runtime whose spend has reached its budget."""
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        reconcile_in(db, now, effects)
    effects.apply(ctx)


def reconcile_in(db: DBSession, now: datetime, effects: Effects) -> None:
    """`reconcile` inside the caller's transaction (`holds.sweep.report_derived`). With no queue
    hold unreleased there is no live one to read (`hold_reads.any_queue_holds`, kept)."""
    policy = load_policy(db)
    live = queue_holds.live_hold(db, None, now) if any_queue_holds(db) else None
    if not policy.cost_budgets and (live is None or live.reason != REASON):
        return
    held = sorted(_held_runtimes(db) & set(policy.cost_budgets)) if policy.cost_budgets else []
    over = [s for s in (spend_of(db, policy, r) for r in held) if s.is_over]
    if not over:
        if live is not None and live.reason == REASON:
            queue_holds.release(db, live, now, by="the spend was reset or the budget changed", effects=effects)
    elif live is None or live.reason in queue_holds.DERIVED:
        detail = {"runtimes": {s.runtime: {"spent": round(s.spent, 2), "budget": s.budget} for s in over}}
        sentence = render("text/queue_hold_cost_budget.j2", spends=over)
        queue_holds.record(db, effects, queue_holds.NewHold(None, REASON, sentence, detail=detail), now)


def reset_spend(ctx: Context, runtime: str, *, surface: str, actor: str | None) -> PolicyAudit:
    """Count `runtime`'s spend from now (audited as a policy change), and ask for a queue pass:
    the sessions its budget held start, and the hold lifts."""
    if runtime not in ctx.limits.runtimes:
        raise InvalidInput(
            error_text("policy/runtime_unknown", runtime=runtime, runtimes=sorted(ctx.limits.runtimes)), field="runtime"
        )
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        resets = {r: datetime.fromisoformat(at) for r, at in (ensure_policy(db).spend_reset_at or {}).items()}
        resets[runtime] = now
        audit = change_policy(
            db, {"spend_reset_at": resets}, surface=surface, actor=actor, now=now, runtimes=ctx.limits.runtimes
        )
        if audit is None:  # reset twice in the same instant: nothing moved, nothing to record
            audit = PolicyAudit(at=now, surface=surface, actor=actor, changes={}, line="")
    request_queue_pass(ctx)
    return audit
