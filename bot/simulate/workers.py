"""The simulated fleet: `VirtualWorkers` turns that last as long as the work they carry and
burn their runtime's dollars per minute, reporting to the meter and to the trace.

A session's work is a list of items (its first turn, each follow-up, each human reply), keyed by
the prompt the simulator delivers. A turn runs for what is left of its item. A halted turn (a
budget pause, a preemption past its grace) keeps its item open with the time it had not yet run
plus the scenario's resume overhead — the tool call in flight is lost — and the nudge that
resumes the session carries on with that item. A turn whose prompt the simulator did not write
(a nudge with nothing interrupted, a recovery) runs a short NUDGE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.simulate.meter import Meter
from scheduler.front import VirtualClock, VirtualDeferrer, VirtualWorkers
from scheduler.ports import Outcome, TurnRequest, TurnResult

NUDGE = timedelta(minutes=2)


@dataclass
class Item:
    """One piece of a session's work: a planned turn (`turn` >= 0) or a reply (`turn` -1)."""

    session_id: int
    turn: int
    remaining: timedelta
    submitted_at: datetime
    started_at: datetime | None = None  # its first dispatch
    done_at: datetime | None = None


@dataclass
class TurnSpan:
    """What one dispatched turn did, for the score: when it ran and what it burned."""

    session_id: int
    started: datetime
    burn_per_min: float
    spends_quota: bool
    ended: datetime | None = None
    halted: bool = False


@dataclass
class Work:
    items: dict[str, Item] = field(default_factory=dict)  # prompt -> item
    interrupted: dict[int, list[str]] = field(default_factory=dict)  # session -> its halted items
    current: dict[int, list[str]] = field(default_factory=dict)  # turn id -> the items it carries

    def add(self, prompt: str, item: Item) -> None:
        self.items[prompt] = item


class SimWorkerPool(VirtualWorkers):
    def __init__(
        self,
        clock: VirtualClock,
        deferrer: VirtualDeferrer,
        *,
        meter: Meter,
        burns: dict[str, float],
        spends: dict[str, bool],
        resume_overhead: timedelta,
        on_item_done: Callable[[Item], None],
    ) -> None:
        super().__init__(clock, deferrer, duration=self._duration, burn_per_min=lambda r: burns.get(r.runtime, 0.0))
        self.meter = meter
        self.burns = burns
        self.spends = spends
        self.resume_overhead = resume_overhead
        self.on_item_done = on_item_done
        self.work = Work()
        self.spans: dict[int, TurnSpan] = {}
        self.changed = True  # something started or ended since the sampler last looked
        self.ended_quota_turns = 0

    def _items_for(self, request: TurnRequest) -> list[str]:
        """What this turn carries: the work its prompt names, and whatever the session had
        halted — whichever turn reaches the agent next (a resume nudge, a person's reply), the
        agent picks its interrupted work up in it."""
        own = request.prompt in self.work.items and self.work.items[request.prompt].done_at is None
        return ([request.prompt] if own else []) + self.work.interrupted.pop(request.session_id, [])

    def _duration(self, request: TurnRequest) -> timedelta:
        keys = self.work.current.get(request.turn_id) or []
        return sum((self.work.items[k].remaining for k in keys), timedelta(0)) if keys else NUDGE

    def submit(self, request: TurnRequest, on_done: Callable[[TurnResult], None]) -> None:
        now = self.clock.now()
        keys = self._items_for(request)
        self.work.current[request.turn_id] = keys
        for key in keys:
            item = self.work.items[key]
            item.started_at = item.started_at or now
        burn = self.burns.get(request.runtime, 0.0)
        spends = self.spends.get(request.runtime, True)
        self.spans[request.turn_id] = TurnSpan(request.session_id, now, burn, spends)
        if spends:
            self.meter.start(request.turn_id, now, burn)
        self.changed = True
        super().submit(request, on_done)

    def _finish(self, turn_id: int, forced: Outcome | None) -> None:
        entry = self.running.get(turn_id)
        if entry is None:
            return
        request, _on_done, started = entry
        now = self.clock.now()
        ran = now - started
        span = self.spans[turn_id]
        span.ended, span.halted = now, forced is Outcome.HALTED
        if span.spends_quota:
            # Recorded before the engine hears of it: the completion reads the meter, and the
            # ledger has the cost of a finished turn exactly once (its accrual ends here).
            self.meter.finish(turn_id, now, span.burn_per_min * ran.total_seconds() / 60.0)
            self.ended_quota_turns += 1
        self.changed = True
        keys = self.work.current.pop(turn_id, [])
        finished: list[Item] = []
        left = ran if span.halted else timedelta.max
        still: list[str] = []
        for key in keys:
            item = self.work.items[key]
            used = min(left, item.remaining)
            item.remaining -= used
            left -= used
            if item.remaining > timedelta(0):
                still.append(key)
            else:
                item.done_at = now
                finished.append(item)
        if still:
            # The tool call in flight is lost with the halt: the work it carried costs a little
            # more when it is picked up again.
            self.work.items[still[0]].remaining += self.resume_overhead
            self.work.interrupted.setdefault(request.session_id, []).extend(still)
        super()._finish(turn_id, forced)
        for item in finished:
            self.on_item_done(item)
