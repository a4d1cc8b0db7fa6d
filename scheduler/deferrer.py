"""The virtual-time Deferrer: one-shot alarms in a heap, fired by advancing a VirtualClock.

This is what lets a test walk a seven-day window in milliseconds and `pacer simulate` replay
a month. Production uses the APScheduler adapter in `integrations/apscheduler_deferrer.py`.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from scheduler.clock import VirtualClock


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
