"""The in-memory fakes of the ports, shipped with the scheduler as procrastinate ships its
in-memory connector: a clock that moves only when told to, the virtual-time Deferrer (one-shot
alarms in a heap, fired by advancing the clock) and turn workers in virtual time.

This is what lets a test walk a seven-day window in milliseconds and `pacer simulate` replay
a month; the scheduler code they drive is the real one. Production uses the system clock
(`scheduler/clock.py`), the APScheduler adapter (`integrations/apscheduler_deferrer.py`) and the
runners' threads (`integrations/runners/pool.py`).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.ports import Outcome, TurnRequest, TurnResult


class VirtualClock:
    """A clock that only moves when told to."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("VirtualClock needs a timezone-aware start")
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, instant: datetime) -> None:
        with self._lock:
            if instant < self._now:
                raise ValueError("a virtual clock does not run backwards")
            self._now = instant

    def advance(self, delta: timedelta) -> datetime:
        with self._lock:
            self._now += delta
            return self._now


class VirtualDeferrer:
    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self._heap: list[tuple[datetime, int, str]] = []
        self._jobs: dict[str, tuple[datetime, int, Callable[..., Any], tuple[Any, ...]]] = {}
        self._seq = itertools.count()
        self.fired = 0

    def schedule(self, job_id: str, at: datetime, func: Callable[..., Any], *args: Any) -> None:
        seq = next(self._seq)
        self._jobs[job_id] = (at, seq, func, args)
        heapq.heappush(self._heap, (at, seq, job_id))

    def cancel(self, job_id: str) -> bool:
        return self._jobs.pop(job_id, None) is not None

    def next_run(self, job_id: str) -> datetime | None:
        job = self._jobs.get(job_id)
        return job[0] if job else None

    def pending(self) -> list[str]:
        return sorted(self._jobs)

    def _pop_due(self, until: datetime) -> tuple[datetime, str, Callable[..., Any], tuple[Any, ...]] | None:
        while self._heap and self._heap[0][0] <= until:
            at, seq, job_id = heapq.heappop(self._heap)
            job = self._jobs.get(job_id)
            if job is None or job[1] != seq:
                continue  # cancelled or replaced
            del self._jobs[job_id]
            return at, job_id, job[2], job[3]
        return None

    def run_until(self, until: datetime) -> int:
        """Fire every alarm due by `until`, in time order, moving the clock to each one."""
        fired = 0
        while (due := self._pop_due(until)) is not None:
            at, _job_id, func, args = due
            if at > self.clock.now():
                self.clock.set(at)
            func(*args)
            fired += 1
        if until > self.clock.now():
            self.clock.set(until)
        self.fired += fired
        return fired

    def advance(self, delta: timedelta) -> int:
        return self.run_until(self.clock.now() + delta)


# A turn "runs" until the VirtualDeferrer reaches its end, and costs its runtime's burn for the
# minutes it ran.
@dataclass
class VirtualWorkers:
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
        self.deferrer.schedule(
            f"turn-end:{request.turn_id}", started + self.duration(request), self._finish, request.turn_id, None
        )

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
        on_done(
            TurnResult(
                outcome,
                cost_usd=minutes * self.burn_per_min(request),
                output=f"simulated {minutes:.1f} min",
                duration_ms=int(minutes * 60000),
                agent_session_id=f"sim-{request.session_id}" if named else None,
            )
        )
