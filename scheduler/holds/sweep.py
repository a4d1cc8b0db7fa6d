"""The holds' periodic sweep: prune stale operator holds, lift queue holds whose time passed,
report a queue waiting on prerequisites, a group whose every candidate overlaps blocked work and
a session waiting on a runtime over its cost budget, and raise any hold deadlock not yet raised
(seed 000, "stale pruning"; seed 002, "The holds"). A TTL and a "Resumes at" have alarms of their
own, and a requested queue pass reports the derived holds; this is the net under them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlmodel import Session as DBSession

from scheduler.context import Context
from scheduler.engine.effects import Effects
from scheduler.holds import budgets, interference, prerequisites
from scheduler.holds.operator import live_holds, notice_deadlocks, prune
from scheduler.holds.prerequisites import reconcile
from scheduler.holds.queue import lift_expired
from scheduler.store.db import session_scope
from scheduler.store.hold_reads import any_hold_store_in_use

log = logging.getLogger("pacer.holds")

Part = Callable[[DBSession, datetime, Effects], None]
# What a requested queue pass reports, in this order: a queue waiting on prerequisites, a group
# whose every candidate overlaps blocked work, a session waiting on a runtime over its budget.
AFTER_A_PASS: tuple[Part, ...] = (prerequisites.reconcile_in, interference.reconcile_in, budgets.reconcile_in)


def sweep(ctx: Context) -> dict[str, Any]:
    """The periodic sweep: prune stale holds, lift queue holds whose time passed, report a queue
    waiting on prerequisites, and raise any hold deadlock not yet raised."""
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:  # most passes find every hold store empty: one transaction
        in_use = any_hold_store_in_use(db)
        # A group that came to overlap blocked work, or a runtime over its budget, without a
        # requested pass says so here.
        _report(db, now, effects, (interference.reconcile_in, budgets.reconcile_in))
    effects.apply(ctx)
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


def report_derived(ctx: Context) -> None:
    """The derived queue holds a requested pass reports (`AFTER_A_PASS`), in one transaction:
    three were a transaction each, after every pass. A failure is logged and the parts are
    asked again each on its own, so one that cannot be read does not keep the others from
    reporting; none of it ever stops the queue."""
    now = ctx.clock.now()
    effects = Effects()
    try:
        with session_scope(ctx.engine) as db:
            _report(db, now, effects, AFTER_A_PASS)
    except Exception:
        log.exception("the derived queue holds could not be reconciled together; each is asked alone")
        _each_alone(ctx)
        return
    effects.apply(ctx)


def _report(db: DBSession, now: datetime, effects: Effects, parts: tuple[Part, ...]) -> None:
    for part in parts:
        db.flush()  # what the part before wrote is read as written (the kept presence is dropped)
        part(db, now, effects)


def _each_alone(ctx: Context) -> None:
    for part in AFTER_A_PASS:
        effects = Effects()
        try:
            with session_scope(ctx.engine) as db:
                part(db, ctx.clock.now(), effects)
        except Exception:  # the report must never stop the queue
            log.exception("the derived queue holds could not be reconciled")
            continue
        effects.apply(ctx)
