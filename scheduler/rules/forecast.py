"""The start-time forecast (issue 32, P20 item 2): when each waiting session is expected to start,
with a range; an estimate, never a promise. The present state — the windows and their resets, the
turns running now, the waiters in queue order — is run forward on a virtual clock `DRAWS` times,
the uncertainty drawn each time, and every waiter's start is read off each run: the median, and a
range from the earliest to the latest of the runs' starts (`spread`: at least the 10–90% range).

Each run makes the decisions the scheduler makes, with its own rules, not an imitation of them:
at every moment something could free work (a turn ending, a window rolling over, a waiter waking,
an arrival, and every `TICK` while a budget holds someone: the re-check sweeps' cadence) the queue
is walked in admission order and each waiter is asked `gate.evaluate` against the fleet and the
windows as they stand in that run, started when it passes — a full fleet or a spent budget ends
the walk, a pace or a claim that does not fit skips only its own kind (`engine.queue_pass`).
Running turns spend their burn on the calibrated windows; a window rolls over at its reset. Drawn:

  a turn's length     from the recent finished turns of its genesis on its runtime (else the
                      runtime's; a running one: from those longer than it has run so far);
  a follow-up turn    after a turn ends, with the share of those turns that had one; it queues
                      at its session's own place (class, precedence, age);
  priority arrivals   a Poisson process at the rate priority sessions were created in that hour of
                      the week: they never wait, so they take slots and budget from spot waiters.

Lighter than `pacer simulate`'s whole engine (a store, alarms, sweeps): 1,000 waiters in about a
second of CPU (`bench/forecast.py`). Pure. What it leaves out (pauses, preemption) is measured:
`pacer simulate` scores each forecast against the start that happened.
"""

from __future__ import annotations

import bisect
import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from scheduler.rules.demand import (
    DEFAULT_TURN_MINUTES,
    MIN_REMAINING_MINUTES,
    Deferred,
    Demand,
    RunningTurn,
    WaitingGroup,
    hour_of_week,
)
from scheduler.rules.gate import Ceiling, Decision, Reason, evaluate
from scheduler.rules.slots import is_full
from scheduler.rules.snapshot import Asking, FleetTurn, PolicyView, Snapshot, WindowState

DRAWS = 7  # runs per forecast: the range is the earliest to the latest start of seven
TICK = timedelta(minutes=5)  # a budget hold is asked again this often (the re-check sweeps' five minutes)
HORIZON = timedelta(days=2)  # a start later than this is "not within the horizon"
_MINUTE = timedelta(minutes=1)


@dataclass(frozen=True)
class Work:
    """A session in the model: one waiting for a turn, or one whose turn runs now."""

    session_id: int
    rank: tuple[int, int, float, int]  # queue order: (0 priority | 1 spot, -precedence, created ts, id)
    is_spot: bool
    spends_quota: bool
    burn_per_min: float
    runtime: str
    weight: float = 1.0
    capacity: int | None = None
    capacity_multiplier: float | None = None
    started_at: datetime | None = None  # running: when its turn started
    not_before: datetime | None = None  # waiting: asleep, or on a retry backoff, until then
    kind: str = ""  # whose history its turn lengths and follow-ups are drawn from (`kind_of`); "": its runtime's


def kind_of(genesis: str, runtime: str) -> str:
    """The history a session's draws come from: its genesis's turns on its runtime (a labelled
    issue's session takes several turns, a typed command one or two)."""
    return f"{genesis}/{runtime}"


PRIORITY_KIND = "priority"  # `kind_of`'s genesis for the priority sessions a forecast expects to arrive


@dataclass(frozen=True)
class Arrivals:
    """Priority sessions expected per hour of week, and what one runs as (its draws: the
    priority sessions' own history, `kind_of(PRIORITY_KIND, runtime)`)."""

    per_hour: tuple[float, ...]
    runtime: str
    burn_per_min: float
    spends_quota: bool = True


@dataclass(frozen=True)
class Outlook:
    """The present state a forecast runs forward from: plain values, read by
    `scheduler.steering.forecasting` from the store and the quota reading."""

    policy: PolicyView
    agent_workers: int
    windows: tuple[WindowState, ...] | None
    running: tuple[Work, ...]
    waiting: tuple[Work, ...]  # the waiters only the gate and the queue hold (any order)
    # Recent turn lengths, and the share of turns a follow-up came after, by kind (`kind_of`) and by runtime.
    turn_minutes: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    follow_up: Mapping[str, float] = field(default_factory=dict)
    arrivals: Arrivals | None = None
    learned: bool = False  # the demand-aware pace has a history to price arrivals with
    demand_usd_per_hour: tuple[float, ...] | None = None  # `demand.arrival_profile`


@dataclass(frozen=True)
class Forecast:
    """One waiter's expected start: the median of the runs and their range. `high` None: in some
    runs it had not started within the horizon."""

    session_id: int
    median: datetime
    low: datetime
    high: datetime | None
    draws: int


def spread(starts: Sequence[datetime | None]) -> tuple[datetime, datetime, datetime | None] | None:
    """(median, low, high) of one waiter's starts over the runs, None for a run past the horizon;
    None when the median itself is past it. With seven runs the earliest and the latest are the
    range: rounding the 10% and 90% ranks outwards keeps it at least that wide."""
    if not starts:
        return None
    ordered = sorted(starts, key=lambda s: (s is None, s or datetime.min))
    k = len(ordered)
    median = ordered[(k - 1) // 2]
    low = ordered[math.floor(0.1 * (k - 1))]
    high = ordered[math.ceil(0.9 * (k - 1))]
    if median is None or low is None:
        return None
    return median, low, high


class _Run:
    """One run forward: the fleet, the queue and the windows as they stand in it."""

    def __init__(self, outlook: Outlook, now: datetime, rng: random.Random) -> None:
        self.o, self.rng, self.now = outlook, rng, now
        self.windows = list(outlook.windows or ())
        self.queue: list[tuple[tuple[int, int, float, int], int, Work]] = sorted(
            (w.rank, i, w) for i, w in enumerate(outlook.waiting)
        )
        self.seq = len(self.queue)
        self.running: list[tuple[datetime, Work]] = []  # (ends at, work)
        self.starts: dict[int, datetime] = {}
        self.keys: Counter[tuple[bool, bool, float, float, int | None, float | None]] = Counter(
            _key(w) for w in outlook.waiting
        )
        self.by_runtime: Counter[tuple[str, float]] = Counter(
            (w.runtime, w.burn_per_min) for w in outlook.waiting if w.spends_quota
        )
        self.sleepers = any(w.not_before is not None for w in outlook.waiting)
        self.means = {k: sum(v) / len(v) for k, v in outlook.turn_minutes.items() if v}  # by runtime: the pace's
        self._fleet: tuple[FleetTurn, ...] | None = None  # the snapshot's fleet, until a turn starts or ends
        self.paced_for = math.inf
        self.arrivals_top = max(outlook.demand_usd_per_hour or (0.0,)) / 60.0  # $/min
        self.longest = max([DEFAULT_TURN_MINUTES, *self.means.values()])
        for w in outlook.running:
            ran = (now - w.started_at) / _MINUTE if w.started_at is not None else 0.0
            self.running.append((now + self._length(w, ran) * _MINUTE, w))
        self.next_arrival = self._arrival_after(now)
        self.budget_held = False

    # ------------------------------------------------------------------ draws

    def _samples(self, w: Work) -> tuple[float, ...]:
        return (self.o.turn_minutes.get(w.kind) if w.kind else None) or self.o.turn_minutes.get(w.runtime, ())

    def _length(self, w: Work, ran: float = 0.0) -> float:
        """Minutes a turn of `w` still runs, having run `ran`: a recent turn's length of its kind
        drawn from those longer than that; with none, the default turn's rest (at least the demand
        rule's ten minutes), or past every recent one, a draw of about ten minutes more."""
        samples = self._samples(w)
        if not samples:
            return max(DEFAULT_TURN_MINUTES - ran, MIN_REMAINING_MINUTES if ran > 0 else DEFAULT_TURN_MINUTES)
        if ran <= 0:
            return self.rng.choice(samples)
        longer = [s for s in samples if s > ran]
        if longer:
            return self.rng.choice(longer) - ran
        return self.rng.expovariate(1.0 / MIN_REMAINING_MINUTES)

    def _follows(self, w: Work) -> bool:
        share = self.o.follow_up.get(w.kind) if w.kind else None
        return self.rng.random() < (share if share is not None else self.o.follow_up.get(w.runtime, 0.0))

    def _arrival_after(self, t: datetime) -> datetime | None:
        arrivals = self.o.arrivals
        if arrivals is None or not any(arrivals.per_hour):
            return None
        mass, end = self.rng.expovariate(1.0), self.now + HORIZON
        while t < end:
            step = min(t.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1), end)
            rate = arrivals.per_hour[hour_of_week(t)]
            hours = (step - t) / timedelta(hours=1)
            if rate * hours >= mass:
                return t + timedelta(hours=mass / rate)
            mass -= rate * hours
            t = step
        return None

    # ------------------------------------------------------------------ the state

    def _advance(self, t: datetime, to: datetime) -> None:
        """Spend the running turns' burn on the calibrated windows from `t` to `to`, rolling a
        window over at its reset."""
        burn = sum(w.burn_per_min for _, w in self.running if w.spends_quota)
        for i, win in enumerate(self.windows):
            if not win.calibrated:
                continue
            at, spent, resets = t, win.spent, win.resets_at
            while resets <= to and win.period > timedelta(0):
                spent += burn * max((resets - at) / _MINUTE, 0.0)
                at, spent, resets = max(at, resets), 0.0, resets + win.period
            spent += burn * max((to - at) / _MINUTE, 0.0)
            self.windows[i] = _moved(win, spent, resets, to)

    def _snapshot(self, t: datetime) -> Snapshot:
        if self._fleet is None:
            self._fleet = tuple(
                FleetTurn(w.session_id, w.is_spot, w.spends_quota, w.burn_per_min, w.weight) for _, w in self.running
            )
        fleet = self._fleet
        demand = Deferred(lambda: self._demand(t)) if self.o.policy.demand_pacing and self.o.learned else None
        return Snapshot(self.o.policy, tuple(self.windows) or None, fleet, self.o.agent_workers, demand=demand)

    def _demand(self, t: datetime) -> Demand:
        running = tuple(
            RunningTurn(w.burn_per_min, w.started_at, self._mean(w.runtime)) for _, w in self.running if w.spends_quota
        )
        waiting = tuple(WaitingGroup(n, burn, self._mean(rt)) for (rt, burn), n in self.by_runtime.items() if n)
        return Demand(running, waiting, False, self.o.demand_usd_per_hour)

    def _mean(self, runtime: str) -> float:
        return self.means.get(runtime, DEFAULT_TURN_MINUTES)

    def _start(self, w: Work, t: datetime) -> None:
        self.starts.setdefault(w.session_id, t)
        started = replace(w, started_at=t, not_before=None)
        self.running.append((t + self._length(w) * _MINUTE, started))
        self._fleet = None

    # ------------------------------------------------------------------ the queue pass

    def queue_pass(self, t: datetime) -> None:
        """Walk the queue in admission order and start what the gate admits (`engine.queue_pass`)."""
        snapshot = self._snapshot(t)
        held: set[tuple[bool, bool, float, float, int | None, float | None]] = set()
        self.budget_held = False
        self.paced_for = math.inf  # minutes before which no pace hold of this pass can lift
        started = False
        i = 0
        while i < len(self.queue):
            w = self.queue[i][2]
            key = _key(w)
            if (w.not_before is not None and w.not_before > t) or key in held:
                i += 1
                continue
            d = evaluate(snapshot, _asking(w), t)
            if d.allowed:
                self.queue.pop(i)
                self._count(w, -1)
                self._start(w, t)
                snapshot = self._snapshot(t)
                started = True
                continue
            if d.ceiling is Ceiling.PACING_CURVE:
                self.budget_held = True  # the curve moves with time; a spent budget waits for an end or a reset
                self.paced_for = 0.0 if started else min(self.paced_for, self._paced_for(d))
            if d.stops_running_work or (d.reason is Reason.FLEET_AT_CAP and is_full(d.fleet_load, d.slots)):
                return
            held.add(key)
            if len(held) >= sum(1 for n in self.keys.values() if n > 0):
                return
            i += 1

    def _paced_for(self, d: Decision) -> float:
        """Minutes before which this pace hold cannot lift with nothing else happening (an end, a
        reset, an arrival): the re-checks before then are skipped, not asked. A lower bound, so the
        re-check that lifts it is the one a tick at a time finds. Per window behind its curve: the
        fleet's burn F spends its room R over the L minutes left, and the asker's burn b passes when
        (F + b)(L - dt) <= R - F dt; the demand-aware pace may pass sooner, the demand's excess over
        the room shrinking at most at margin x F + (1 + margin) x the arrivals' top rate while every
        expected turn fits in what is left; in fraction mode, when the line reaches what was spent."""
        bound = 0.0
        for f in d.windows:
            if f.within_pace:
                continue
            period = next((w.period / _MINUTE for w in self.windows if w.name == f.name), 0.0)
            if not f.calibrated and period > 0 and f.spot_budget > 0:
                bound = max(bound, f.minutes_left - period * (1 - f.spent / f.spot_budget))
                continue
            if not f.calibrated or f.fleet_burn is None or d.own_burn <= 0:
                return 0.0
            fleet, own, left = f.fleet_burn, d.own_burn, f.minutes_left
            lifts = ((fleet + own) * left - f.spot_left) / own
            if f.demand is not None:
                total = f.demand.total
                if total is not None:
                    m = f.demand.margin_pct / 100.0
                    rate = m * fleet + (1 + m) * self.arrivals_top
                    excess = total * (1 + m) - f.demand.room
                    lifts = min(lifts, excess / rate if rate > 0 else math.inf, left - self.longest)
            bound = max(bound, lifts)
        return bound

    def _next(self, t: datetime) -> datetime | None:
        due = [end for end, _ in self.running]
        due += [w.resets_at for w in self.windows if w.calibrated and w.period > timedelta(0)]
        if self.sleepers:
            due += [w.not_before for _, _, w in self.queue if w.not_before is not None and w.not_before > t]
        if self.next_arrival is not None:
            due.append(self.next_arrival)
        if self.budget_held:  # the re-check's next tick that could find the curve lifted
            ticks = max(math.floor(self.paced_for / (TICK / _MINUTE)), 1) if math.isfinite(self.paced_for) else 1
            due.append(t + TICK * ticks)
        later = [d for d in due if d > t]
        return min(later) if later else None

    def _happen(self, t: datetime) -> None:
        """Turns ending at `t` (and their follow-ups), and an arrival due at `t`."""
        ended = [w for end, w in self.running if end <= t]
        if ended:
            self.running = [(end, w) for end, w in self.running if end > t]
            self._fleet = None
        for w in ended:
            if self._follows(w):
                self._enqueue(replace(w, started_at=None))
        a = self.o.arrivals
        if a is not None and self.next_arrival is not None and self.next_arrival <= t:
            self.seq += 1
            sid = -self.seq  # not a session of the store: never forecast, only in the way
            self._enqueue(Work(sid, (0, 0, t.timestamp(), sid), False, a.spends_quota, a.burn_per_min, a.runtime,
                               kind=kind_of(PRIORITY_KIND, a.runtime)))
            self.next_arrival = self._arrival_after(t)

    def _enqueue(self, w: Work) -> None:
        self.seq += 1
        bisect.insort(self.queue, (w.rank, self.seq, w))
        self._count(w, 1)

    def _count(self, w: Work, by: int) -> None:
        self.keys[_key(w)] += by
        if w.spends_quota:
            self.by_runtime[w.runtime, w.burn_per_min] += by

    def run(self, targets: frozenset[int] | None = None) -> dict[int, datetime]:
        t, end = self.now, self.now + HORIZON
        waiting = targets if targets is not None else {w.session_id for w in self.o.waiting}
        while True:
            self.queue_pass(t)
            if waiting <= self.starts.keys():
                return self.starts
            nxt = self._next(t)
            if nxt is None or nxt > end:
                return self.starts
            self._advance(t, nxt)
            t = nxt
            self._happen(t)


def _moved(w: WindowState, spent: float, resets_at: datetime, read_at: datetime) -> WindowState:
    moved = object.__new__(WindowState)  # `replace(w, ...)`, cheaper: a forecast moves every window at every event
    moved.__dict__.update(w.__dict__, spent=spent, resets_at=resets_at, read_at=read_at, using_overage=False)
    return moved


def _key(w: Work) -> tuple[bool, bool, float, float, int | None, float | None]:
    """Waiters that ask the gate the same question get the same answer in one pass."""
    return (w.is_spot, w.spends_quota, w.burn_per_min, w.weight, w.capacity, w.capacity_multiplier)


def _asking(w: Work) -> Asking:
    return Asking(w.session_id, w.is_spot, False, w.spends_quota, w.burn_per_min, w.weight, w.capacity,
                  w.capacity_multiplier)


def forecast(
    outlook: Outlook, now: datetime, *, draws: int = DRAWS, seed: int = 0, targets: frozenset[int] | None = None
) -> dict[int, Forecast]:
    """Every waiter's forecast start (or only `targets`': each run stops once they have started);
    a waiter whose median run does not start it within the horizon has none."""
    if draws < 1:
        raise ValueError(f"draws must be >= 1 (got {draws!r})")
    rng = random.Random(seed)
    runs = [_Run(outlook, now, random.Random(rng.random())).run(targets) for _ in range(draws)]
    out: dict[int, Forecast] = {}
    for w in outlook.waiting:
        if targets is not None and w.session_id not in targets:
            continue
        found = spread([r.get(w.session_id) for r in runs])
        if found is not None:
            out[w.session_id] = Forecast(w.session_id, *found, draws)
    return out
