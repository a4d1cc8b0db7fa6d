"""The state of the simulated deployment, sampled each simulated minute.

Cheap by construction: what runs is read from the worker pool and what the gate sees from the
meter, both in memory; the waiting population (held, paused, asleep) is one grouped query, and
only after something could have changed it (a turn started or ended, a notice — a new hold, a
pause, a mark — or a ceiling-style sweep, which settles marks without one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, bindparam, func, union_all
from sqlalchemy import select as sa_select

from bot.simulate.demand import Tracked
from bot.simulate.meter import Meter
from bot.simulate.scenario import Scenario
from bot.simulate.workers import SimWorkerPool
from scheduler.front import (
    SESSIONS,
    SchedulingClass,
    Status,
    WindowState,
    class_from,
    core,
    load_policy,
    pace_unneeded,
    projection_minutes,
    session_scope,
)


@dataclass
class WindowSample:
    spent: float  # what the gate sees: the meter's spend in the current window (a provider window: its
    # utilization, on the scale of the window's budget, whatever calibration prices it at)
    capacity: float
    window_start: datetime
    resets_at: datetime


@dataclass
class Sample:
    at: datetime
    running_spot: int
    running_priority: int
    running_free: int  # runtimes that spend no quota
    held: int  # waiting on a hold (the gate's or an admission check's)
    paused: int  # dormant paused, or marked to yield
    spot_waiting: int  # spot sessions held or paused and not asleep
    fleet_burn: float  # dollars per minute, quota-spending turns
    idle_while_holding: bool
    windows: dict[str, WindowSample] = field(default_factory=dict)
    # What would keep one more spot session out, window by window, as the gate reckons it (the
    # first window where it does, else None): no room under the cap for its projection on top
    # of the fleet's, or the fleet with it burning faster than the pacing curve sustains.
    budget_binds: str | None = None
    pace_binds: str | None = None


@dataclass
class Trace:
    samples: list[Sample] = field(default_factory=list)


def _waiting_stmt() -> Any:
    waiting = SESSIONS.c.status == Status.WAITING.value
    is_held = SESSIONS.c.hold_reason.is_not(None)
    is_paused = SESSIONS.c.pause_reason.is_not(None)
    asleep = SESSIONS.c.wake_at.is_not(None) & (SESSIONS.c.wake_at > bindparam("now"))
    marked = SESSIONS.c.preempt_mark_at.is_not(None)
    keys = (SESSIONS.c.scheduling_class, SESSIONS.c.genesis, waiting, is_held, is_paused, asleep, marked)
    # Two indexed halves rather than one OR, which SQLite answers with a scan of every session.
    return union_all(
        sa_select(*keys, func.count()).where(waiting).group_by(*keys),
        sa_select(*keys, func.count()).where(~waiting, marked).group_by(*keys),
    )


_WAITING = _waiting_stmt()  # built once: it runs most simulated minutes


class Sampler:
    def __init__(
        self, scenario: Scenario, engine: Engine, pool: SimWorkerPool, meter: Meter, tracked: Mapping[int, Tracked]
    ) -> None:
        self.scenario, self.engine, self.pool, self.meter, self.tracked = scenario, engine, pool, meter, tracked
        self.trace = Trace()
        self.dirty = True
        self._waiting = (0, 0, 0)
        self.slots = min(scenario.policy.max_sessions, scenario.policy.agent_workers)
        spot_runtimes = {r.name: r for r in scenario.runtimes if r.spends_quota}
        burns = [r.burn_usd_per_min for r in spot_runtimes.values() if r.burn_usd_per_min > 0]
        self.one_session_burn = min(burns) if burns else 0.0
        self.provided = {w.name: float(w.budget_usd or 0.0) for w in scenario.windows if w.reported_by}

    def _count_waiting(self, now: datetime) -> tuple[int, int, int]:
        """One grouped query; the class is resolved here from (stored class, genesis), the same
        rule `class_of` applies, so the query stays a handful of result rows. A running session
        marked to yield counts as paused, so marked rows come in the same query."""
        with session_scope(self.engine) as db:
            policy = load_policy(db)
            rows = core(db, _WAITING, {"now": now}).all()
        held = paused = spot_waiting = 0
        for stored, genesis, waiting_row, held_row, paused_row, sleeping, marked_row, n in rows:
            if marked_row:
                paused += n
            if not waiting_row:
                continue
            klass = class_from(stored, genesis, policy)
            if paused_row:
                paused += n
            elif held_row:
                held += n
            if klass is SchedulingClass.SPOT and (held_row or paused_row) and not sleeping:
                spot_waiting += n
        return held, paused, spot_waiting

    def sample(self, now: datetime) -> None:
        pool = self.pool
        if self.dirty or pool.changed:
            self._waiting = self._count_waiting(now)
            self.dirty = pool.changed = False
        held, paused, spot_waiting = self._waiting
        running_spot = running_priority = running_free = 0
        burn = 0.0
        quota_running = 0
        for turn_id in pool.running:
            span = pool.spans[turn_id]
            track = self.tracked.get(span.session_id)
            if not span.spends_quota:
                running_free += 1
                continue
            quota_running += 1
            burn += span.burn_per_min
            if track is not None and track.scheduling_class == "spot":
                running_spot += 1
            else:
                running_priority += 1
        reading = self.meter.read(now)
        windows: dict[str, WindowSample] = {}
        states = [  # the gate's own units: a window not yet priced (a provider's, before calibration) in fractions
            WindowState(
                w.name,
                timedelta(seconds=w.period_seconds),
                w.resets_at,
                float(w.capacity_usd) if w.capacity_usd else 1.0,
                float(w.spent_usd or 0.0) if w.capacity_usd else w.utilization,
                bool(w.capacity_usd),
            )
            for w in (reading.windows if reading is not None else ())
        ]
        reserves = {w.name: self.scenario.policy.reserve_pct(w.name) for w in states}
        unpaced = pace_unneeded(states, reserves, now) if running_spot else frozenset(w.name for w in states)
        budget_binds: str | None = None
        pace_binds: str | None = None
        with_one_more = burn + self.one_session_burn
        for w in states:
            if w.name in self.provided:
                budget = self.provided[w.name]
                share = w.spent / w.capacity if w.capacity else 0.0
                windows[w.name] = WindowSample(share * budget, budget, w.resets_at - w.period, w.resets_at)
            else:
                windows[w.name] = WindowSample(w.spent, w.capacity, w.resets_at - w.period, w.resets_at)
            spot_budget = w.capacity * (1 - reserves[w.name] / 100.0)
            minutes_left = (w.resets_at - now).total_seconds() / 60.0
            if not w.calibrated:  # fraction mode, as the gate reckons it: no projection, a straight-line pace
                if budget_binds is None and w.spent >= spot_budget:
                    budget_binds = w.name
                elapsed = 1.0 - minutes_left / (w.period.total_seconds() / 60.0)
                if pace_binds is None and w.name not in unpaced and w.spent > spot_budget * min(max(elapsed, 0.0), 1.0):
                    pace_binds = w.name
                continue
            if (
                budget_binds is None and w.spent + with_one_more * projection_minutes(minutes_left) > spot_budget
            ):  # the gate's cap
                budget_binds = w.name
            # The gate's pace; waived with no spot work in flight, and where it protects nothing.
            if (
                pace_binds is None
                and w.name not in unpaced
                and minutes_left > 0
                and with_one_more > (spot_budget - w.spent) / minutes_left
            ):
                pace_binds = w.name
        idle = spot_waiting > 0 and running_spot == 0 and quota_running < self.slots and budget_binds is None
        self.trace.samples.append(
            Sample(
                now,
                running_spot,
                running_priority,
                running_free,
                held,
                paused,
                spot_waiting,
                burn,
                idle,
                windows,
                budget_binds,
                pace_binds,
            )
        )
