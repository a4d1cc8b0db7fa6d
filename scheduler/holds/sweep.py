"""The holds' periodic sweep: prune stale operator holds, lift queue holds whose time passed,
report a queue waiting on prerequisites, a group whose every candidate overlaps blocked work and
a session waiting on a runtime over its cost budget, and raise any hold deadlock not yet raised
(seed 000, "stale pruning"; seed 002, "The holds"). A TTL and a "Resumes at" have alarms of their
own, and a requested queue pass reports the derived holds; this is the net under them.
"""

from __future__ import annotations

from typing import Any

from scheduler.context import Context
from scheduler.engine.effects import Effects
from scheduler.holds.budgets import reconcile as reconcile_budgets
from scheduler.holds.interference import reconcile as reconcile_interference
from scheduler.holds.operator import live_holds, notice_deadlocks, prune
from scheduler.holds.prerequisites import reconcile
from scheduler.holds.queue import lift_expired
from scheduler.store.db import session_scope
from scheduler.store.hold_reads import any_hold_store_in_use


def sweep(ctx: Context) -> dict[str, Any]:
    """The periodic sweep: prune stale holds, lift queue holds whose time passed, report a queue
    waiting on prerequisites, and raise any hold deadlock not yet raised."""
    with session_scope(ctx.engine) as db:  # most passes find every hold store empty: one read
        in_use = any_hold_store_in_use(db)
    reconcile_interference(ctx)  # a group that came to overlap blocked work without a requested pass says so here
    reconcile_budgets(ctx)
    if not in_use:
        return {"pruned": [], "queue_holds_lifted": [], "deadlocks": []}
    pruned = prune(ctx)
    lifted = lift_expired(ctx)
    reconcile(ctx)  # a queue that came to wait on prerequisites without a requested pass says so here
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        raised = notice_deadlocks(ctx, db, live_holds(db, now), now, effects)
    effects.apply(ctx)
    return {"pruned": pruned, "queue_holds_lifted": lifted, "deadlocks": raised}
