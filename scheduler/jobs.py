"""Alarm targets by name, each called as `target(ctx, *args)`: the scheduler's composition root.
Production runs them through the module-level `bot.jobs.run` (APScheduler stores a name and ids,
never a callable it could not find again); virtual time through `Context.run_job`. Whoever builds
a Context gives it `jobs=targets()`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from scheduler.context import Context
from scheduler.engine import completion, queue_pass
from scheduler.engine.recheck_sweep import recheck_sweep
from scheduler.holds import auth_outage, budgets, cost_caps, interference, prerequisites
from scheduler.holds import operator as operator_holds
from scheduler.holds import queue as queue_holds
from scheduler.holds import sweep as holds_sweep
from scheduler.pauses import ceiling, sleep, top_up_sweep
from scheduler.steering import firing, promotion, session_events, trigger_release
from scheduler.store import policy

log = logging.getLogger("pacer.jobs")


def queue_pass_and_report(ctx: Context) -> list[int]:
    """A requested queue pass, then the holds it reports: whether every candidate now waits on a
    prerequisite, whether every candidate of a group overlaps blocked work, and whether a session
    waits on a runtime over its cost budget."""
    started = queue_pass.queue_pass(ctx)
    for reconcile in (prerequisites.reconcile, interference.reconcile, budgets.reconcile):
        try:
            reconcile(ctx)
        except Exception:  # the report must never stop the queue
            log.exception("the derived queue holds could not be reconciled")
    return started


def targets() -> dict[str, Callable[..., Any]]:
    return {
        "turn_done": completion.complete_turn,
        "recheck": queue_pass.recheck,
        "queue_pass": queue_pass_and_report,
        # Alarms a job store already holds under the name this target had before keep firing.
        "kick": queue_pass_and_report,
        "wake": sleep.wake,
        # Stored names (a periodic job's row names its target): the re-check sweep and the holds' sweep.
        "hold_sweep": recheck_sweep,
        "operator_hold_sweep": holds_sweep.sweep,
        "operator_hold_expired": operator_holds.expired,
        "queue_hold_due": queue_holds.due,
        "schedule_fire": firing.schedule_fire,
        "session_event": session_events.session_event,
        "trigger_release": trigger_release.release_promoted,
        "ceiling_sweep": ceiling.ceiling_sweep,
        "ceiling_check": ceiling.ceiling_check,
        cost_caps.DUE_JOB: cost_caps.cost_cap_due,
        "max_override_expired": policy.expire_max_override,
        "auth_outage_sweep": auth_outage.unpark_sweep,
        "top_up_sweep": top_up_sweep.top_up_sweep,
        "promote_after_message": promotion.promote_after_message,
    }
