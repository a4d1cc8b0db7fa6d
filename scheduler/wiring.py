"""Where the scheduler's parts plug into a Context: admission checks, hooks and periodic sweeps.

Production (`bot/runtime.py`), the tests' harness and `pacer simulate` all call `install`, so
the same parts run everywhere. Each area adds its own lines here.
"""

from __future__ import annotations

from datetime import timedelta

from scheduler.context import Context

# name -> interval. Each name is a target in `scheduler.jobs.targets()`.
PERIODIC: dict[str, timedelta] = {
    "hold_sweep": timedelta(minutes=5),
    "ceiling_sweep": timedelta(minutes=5),  # the budget ceiling and the preemption marks (P4)
    # Holds (P7): prune, lift lost queue holds, deadlocks. A TTL and a "Resumes at" have alarms
    # of their own; this is the net under them, on the same five minutes as the others.
    "operator_hold_sweep": timedelta(minutes=5),
}


def install(ctx: Context) -> Context:
    """Register every admission check and hook on `ctx` (idempotent)."""
    if ctx.installed:
        return ctx
    ctx.installed = True
    # Session events: ao_event triggers hear every notice (scheduler/session_events.py).
    from scheduler import session_events

    ctx.hooks.setdefault("*", []).append(session_events.listener(ctx))
    # Preemption: a priority start into a full fleet takes a slot off a running spot session.
    from scheduler import preemption

    ctx.hooks.setdefault("before_start", []).append(preemption.before_start)
    _install_holds(ctx)
    return ctx


def _install_holds(ctx: Context) -> None:
    """Holds (P7). Order matters: the first check that says no is the reason a session shows."""
    from scheduler import capacity, groups, operator_holds, prerequisites, queue_holds

    ctx.admission_checks.extend([
        operator_holds.admission_check(ctx),
        queue_holds.admission_check(ctx),
        prerequisites.admission_check(ctx),
        groups.admission_check(ctx),
        capacity.admission_check(ctx),
        capacity.deference_check(ctx),
    ])
    # Runner outcomes that become queue holds; the others stay with turns._settle.
    ctx.hooks.setdefault("turn_finished", []).append(queue_holds.on_turn_finished)


def run_periodic(ctx: Context, name: str) -> object:
    """Run one periodic sweep by name (the simulator and tests call this in virtual time)."""
    return ctx.run_job(name)
