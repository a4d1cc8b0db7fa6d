"""Alarm targets by name: `targets()[name](ctx, *args)`. Production runs them through the
module-level `bot.jobs.run`; virtual time runs them through `Context.run_job`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def targets() -> dict[str, Callable[..., Any]]:
    from scheduler import (
        ceiling,
        firing,
        operator_holds,
        prerequisites,
        promotion,
        queue_holds,
        session_events,
        sleep,
        sweeps,
        trigger_release,
        turns,
    )

    return {
        "recheck": turns.recheck,
        # A kick: a queue pass, then whether every candidate waits on a prerequisite (P7).
        "kick": lambda ctx: prerequisites.queue_pass(ctx),
        "wake": sleep.wake,
        "hold_sweep": sweeps.hold_sweep,
        # Holds (P7).
        "operator_hold_sweep": operator_holds.sweep,
        "operator_hold_expired": operator_holds.expired,
        "queue_hold_due": queue_holds.due,
        # Intake (schedules, session events) and the trigger promotion release.
        "schedule_fire": firing.schedule_fire,
        "session_event": session_events.session_event,
        "trigger_release": trigger_release.release_promoted,
        # The budget ceiling sweep and the human-message re-rank (P4).
        "ceiling_sweep": ceiling.ceiling_sweep,
        "promote_after_message": promotion.promote_after_message,
    }
