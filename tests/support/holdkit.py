"""Shared steps for the hold tests: a turn finished with a chosen runner outcome, the notices a test heard, and the
`holds` text as a person reads it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from scheduler.context import Context
from scheduler.engine.completion import complete_turn
from scheduler.holds.view import HoldsView, all_holds, render_holds
from scheduler.ports import Outcome, TurnResult
from scheduler.store.db import session_scope
from scheduler.testing import VirtualDeferrer, VirtualWorkers


class Heard:
    """Every notice the scheduler emitted, in order."""

    def __init__(self, ctx: Context) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        ctx.plugins.listeners.append(self)

    def __call__(self, event: str, context: Mapping[str, Any]) -> None:
        self.events.append((event, dict(context)))

    def of(self, event: str) -> list[dict[str, Any]]:
        return [c for e, c in self.events if e == event]


def running_turn_id(workers: VirtualWorkers, session_id: int) -> int:
    ids = [tid for tid, (req, _done, _at) in workers.running.items() if req.session_id == session_id]
    assert ids, f"session #{session_id} has no running turn"
    return ids[0]


def finish(
    ctx: Context, workers: VirtualWorkers, deferrer: VirtualDeferrer, session_id: int, outcome: Outcome, **result: Any
) -> None:
    """The runner reports `outcome` for the session's running turn now."""
    turn_id = running_turn_id(workers, session_id)
    workers.running.pop(turn_id)
    deferrer.cancel(f"turn-end:{turn_id}")
    complete_turn(ctx, turn_id, TurnResult(outcome, **result))
    deferrer.advance(timedelta(0))  # the queue pass the completion requested


def holds(ctx: Context) -> HoldsView:
    with session_scope(ctx.engine) as db:
        return all_holds(db, ctx.clock.now())


def holds_text(ctx: Context) -> str:
    return render_holds(holds(ctx))
