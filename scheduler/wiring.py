"""Where the scheduler's parts plug into a Context: alarm targets, admission checks, hooks and
periodic sweeps.

Production (`bot/runtime/process.py`), the tests' harness and `pacer simulate` all call `install`, so
the same parts run everywhere.
"""

from __future__ import annotations

from datetime import timedelta

from scheduler import alarms
from scheduler.context import Context
from scheduler.holds import (
    auth_outage,
    budgets,
    capacity,
    cost_caps,
    groups,
    interference,
    prerequisites,
)
from scheduler.holds import operator as operator_holds
from scheduler.holds import outcome as outcome_holds
from scheduler.holds import queue as queue_holds
from scheduler.jobs import targets
from scheduler.pauses import preemption
from scheduler.steering import session_events

# name -> interval. Each name is a target in `scheduler.jobs.targets()`.
PERIODIC: dict[str, timedelta] = {
    alarms.HOLD_SWEEP: timedelta(minutes=5),  # the re-check sweep (`scheduler/engine/recheck_sweep.py`)
    alarms.CEILING_SWEEP: timedelta(minutes=5),  # the budget ceiling and the preemption marks
    # Prune stale operator holds, lift lost queue holds, raise deadlocks. A TTL and a "Resumes
    # at" have alarms of their own; this is the net under them, on the same five minutes.
    alarms.OPERATOR_HOLD_SWEEP: timedelta(minutes=5),
    # The auth-outage park's owner: wakes the parked population once a login can serve.
    alarms.AUTH_OUTAGE_SWEEP: auth_outage.SWEEP_EVERY,
    # The backlog top-up ceiling: under-since, and no_sessions_in_progress once per cooldown.
    alarms.TOP_UP_SWEEP: timedelta(minutes=1),
}


def install(ctx: Context) -> Context:
    """Register every alarm target, admission check and hook on `ctx` (idempotent)."""
    if ctx.installed:
        return ctx
    ctx.installed = True
    if not ctx.jobs:
        ctx.jobs = targets()
    # Session events: ao_event triggers hear every notice, and the fleet events the top-up sweep fires.
    ctx.plugins.listeners.append(session_events.listener(ctx))
    ctx.plugins.fleet_events.append(session_events.fleet_event)
    # Preemption: a priority start into a full fleet takes a slot off a running spot session.
    ctx.plugins.before_start.append(preemption.before_start)
    # A capped session's turn: the alarm that halts it when its burn estimate reaches the cap.
    ctx.plugins.before_start.append(cost_caps.before_start)
    # Order matters: the first check that says no is the reason a session shows.
    ctx.plugins.admission_checks.extend([
        operator_holds.admission_check(ctx),
        auth_outage.admission_check(ctx),
        queue_holds.admission_check(ctx),
        prerequisites.admission_check(ctx),
        groups.admission_check(ctx),
        interference.admission_check(ctx),
        budgets.admission_check(ctx),
        cost_caps.admission_check(ctx),
        capacity.admission_check(ctx),
        capacity.deference_check(ctx),
    ])
    # An agent that stopped itself at its session's cost cap: held on the cap, as Pacer's halt leaves it.
    ctx.plugins.turn_finished.append(cost_caps.on_turn_finished)
    # Runner outcomes that become queue holds; the others stay with `completion.settle`.
    ctx.plugins.turn_finished.append(outcome_holds.on_turn_finished)
    return ctx


def run_periodic(ctx: Context, name: str) -> object:
    """Run one periodic sweep by name (the simulator and tests call this in virtual time)."""
    return ctx.run_job(name)
