"""Alarm targets by name. The virtual deferrer takes closures over a Context; APScheduler takes
the module-level functions in `bot/jobs.py`, which find the live Context by themselves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scheduler.context import Context


def targets() -> dict[str, Callable[..., Any]]:
    from scheduler import sleep, sweeps, turns

    return {
        "recheck": turns.recheck,
        "kick": lambda ctx: turns.pump(ctx),
        "wake": sleep.wake,
        "hold_sweep": sweeps.hold_sweep,
    }


def bound(ctx: Context, name: str) -> Callable[..., Any]:
    target = targets()[name]

    def call(*args: Any) -> Any:
        return target(ctx, *args)

    call.__name__ = f"{name}_job"
    return call
