"""Alarm targets by name: `targets()[name](ctx, *args)`. Production runs them through the
module-level `bot.jobs.run`; virtual time runs them through `Context.run_job`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def targets() -> dict[str, Callable[..., Any]]:
    from scheduler import firing, session_events, sleep, sweeps, trigger_release, turns

    return {
        "recheck": turns.recheck,
        "kick": lambda ctx: turns.pump(ctx),
        "wake": sleep.wake,
        "hold_sweep": sweeps.hold_sweep,
        # Intake (schedules, session events) and the trigger promotion release.
        "schedule_fire": firing.schedule_fire,
        "session_event": session_events.session_event,
        "trigger_release": trigger_release.release_promoted,
    }
