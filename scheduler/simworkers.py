"""A worker pool in virtual time: a turn "runs" until the VirtualDeferrer reaches its end, and
costs its runtime's burn for the minutes it ran. Used by tests and `pacer simulate`; the
scheduler code it drives is the real one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from scheduler.clock import VirtualClock
from scheduler.deferrer import VirtualDeferrer
from scheduler.ports import Outcome, TurnRequest, TurnResult


@dataclass
class VirtualWorkerPool:
    clock: VirtualClock
    deferrer: VirtualDeferrer
    duration: Callable[[TurnRequest], timedelta] = lambda _r: timedelta(minutes=20)
    burn_per_min: Callable[[TurnRequest], float] = lambda _r: 0.5
    outcome: Callable[[TurnRequest], Outcome] = lambda _r: Outcome.SUCCESS
    # False: the agent names its conversation only in its final result (a command runner with
    # `--output-format json`), so a halted turn reports none.
    names_conversation_early: bool = True
    running: dict[int, tuple[TurnRequest, Callable[[TurnResult], None], datetime]] = field(default_factory=dict)
    submitted: list[TurnRequest] = field(default_factory=list)

    def submit(self, request: TurnRequest, on_done: Callable[[TurnResult], None]) -> None:
        started = self.clock.now()
        self.running[request.turn_id] = (request, on_done, started)
        self.submitted.append(request)
        self.deferrer.schedule(f"turn-end:{request.turn_id}", started + self.duration(request), self._finish, request.turn_id, None)

    def halt(self, turn_id: int) -> bool:
        if turn_id not in self.running:
            return False
        self.deferrer.cancel(f"turn-end:{turn_id}")
        self._finish(turn_id, Outcome.HALTED)
        return True

    def _finish(self, turn_id: int, forced: Outcome | None) -> None:
        entry = self.running.pop(turn_id, None)
        if entry is None:
            return
        request, on_done, started = entry
        minutes = (self.clock.now() - started).total_seconds() / 60.0
        outcome = forced or self.outcome(request)
        named = self.names_conversation_early or forced is None
        on_done(TurnResult(outcome, cost_usd=minutes * self.burn_per_min(request), output=f"simulated {minutes:.1f} min",
                           duration_ms=int(minutes * 60000), agent_session_id=f"sim-{request.session_id}" if named else None))
