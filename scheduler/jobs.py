"""Alarm targets by name (`scheduler.alarms`), each called as `target(ctx, *args)`: the scheduler's composition root.
Production runs them through the module-level `bot.jobs.run` (APScheduler stores a name and ids,
never a callable it could not find again); virtual time through `Context.run_job`. Whoever builds
a Context gives it `jobs=targets()`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from scheduler import alarms
from scheduler.context import Context
from scheduler.engine import completion, queue_pass
from scheduler.engine.recheck_sweep import recheck_sweep
from scheduler.holds import auth_outage, cost_caps
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
    holds_sweep.report_derived(ctx)  # one transaction, and never an exception: it must not stop the queue
    return started


def targets() -> dict[str, Callable[..., Any]]:
    return {
        alarms.TURN_DONE: completion.complete_turn,
        alarms.RECHECK: queue_pass.recheck,
        alarms.QUEUE_PASS: queue_pass_and_report,
        alarms.WAKE: sleep.wake,
        alarms.HOLD_SWEEP: recheck_sweep,
        alarms.OPERATOR_HOLD_SWEEP: holds_sweep.sweep,
        alarms.OPERATOR_HOLD_EXPIRED: operator_holds.expired,
        alarms.QUEUE_HOLD_DUE: queue_holds.due,
        alarms.SCHEDULE_FIRE: firing.schedule_fire,
        alarms.SESSION_EVENT: session_events.session_event,
        alarms.TRIGGER_RELEASE: trigger_release.release_promoted,
        alarms.CEILING_SWEEP: ceiling.ceiling_sweep,
        alarms.CEILING_CHECK: ceiling.ceiling_check,
        alarms.COST_CAP_DUE: cost_caps.cost_cap_due,
        alarms.MAX_OVERRIDE_EXPIRED: policy.expire_max_override,
        alarms.AUTH_OUTAGE_SWEEP: auth_outage.unpark_sweep,
        alarms.TOP_UP_SWEEP: top_up_sweep.top_up_sweep,
        alarms.PROMOTE_AFTER_MESSAGE: promotion.promote_after_message,
    }
