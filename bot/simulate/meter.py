"""The quota source in virtual time: what the provider's meter would read while the simulated
fleet spends. Two shapes, both behind the `QuotaSource` port:

  LedgerMeter    the ledger's semantics (`integrations/quota/ledger.py`) kept in memory: a
                 window's spend is the recorded cost of turns that finished inside it (a turn
                 that began before the window's start split there, pro rata by time) plus what
                 running turns have accrued inside it; windows reset on a fixed schedule
                 anchored at their first reset.
  ProviderMeter  (provider.py) the windows a scenario marks `reported_by`, as the provider's
                 agents report them, read by production's `agents` source.
  AccountsMeter  a pool of accounts (`[[accounts]]`): each turn lands on the servable account
                 with the most room, each account keeps its own ledger plus what others spend
                 on it (its readings over time), and the pool is averaged by the same rules
                 the pool source uses (`scheduler.rules.pool`), priced by the accounts' capacities.

Reading the database instead (LedgerSource itself) would cost three queries per gate decision;
the simulator makes tens of thousands, so the same arithmetic runs over the pool's own record
of starts and finishes — the numbers are identical, the speed is not.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from bot.simulate.scenario import AccountSpec, Scenario
from scheduler.front import pool_utilization, share_before, window_bounds
from scheduler.ports import AccountReading, QuotaReading, WindowReading


@dataclass
class Ledger:
    """Finished costs in time order (prefix sums) and the turns still running.

    A turn that straddles a window's start counts in that window only for the share of its run
    after the start (`share_before`, the ledger's rule). What each start's straddlers spent
    before it is worked out once per start and kept up as turns finish, so a read stays a
    bisect and a walk over the running turns."""

    times: list[datetime] = field(default_factory=list)
    totals: list[float] = field(default_factory=lambda: [0.0])
    began: list[datetime] = field(default_factory=list)  # each finished turn's start, in finish order
    costs: list[float] = field(default_factory=list)
    running: dict[int, tuple[datetime, float]] = field(default_factory=dict)
    before: dict[datetime, list[tuple[datetime, float]]] = field(
        default_factory=dict
    )  # start -> (finished, dollars before it)

    def start(self, turn_id: int, at: datetime, burn_per_min: float) -> None:
        self.running[turn_id] = (at, burn_per_min)

    def finish(self, turn_id: int, at: datetime, cost: float) -> None:
        started = self.running.pop(turn_id, (at, 0.0))[0]
        self.times.append(at)
        self.totals.append(self.totals[-1] + cost)
        self.began.append(started)
        self.costs.append(cost)
        for since, parts in self.before.items():
            if started < since <= at:
                parts.append((at, cost * share_before(started, at, since)))

    def _before(self, since: datetime) -> list[tuple[datetime, float]]:
        parts = self.before.pop(since, None)
        if parts is None:
            first = bisect_left(self.times, since)
            parts = [
                (self.times[i], self.costs[i] * share_before(self.began[i], self.times[i], since))
                for i in range(first, len(self.times))
                if self.began[i] < since
            ]
        self.before[since] = parts  # most recently read last: the least recently read goes first
        if len(self.before) > 8:  # the windows now open, with room to spare
            del self.before[next(iter(self.before))]
        return parts

    def spent(self, since: datetime, now: datetime) -> float:
        finished = self.totals[-1] - self.totals[bisect_left(self.times, since)]
        finished -= sum(part for at, part in self._before(since) if at <= now)
        accrued = 0.0
        for started, burn in self.running.values():
            begin = max(started, since)
            if begin < now:
                accrued += burn * (now - begin).total_seconds() / 60.0
        return finished + accrued


class LedgerMeter:
    """The ledger's windows over the simulated fleet's spend."""

    def __init__(self, scenario: Scenario) -> None:
        self.windows = [(w.name, w.period, w.budget_usd or 0.0, w.first_reset) for w in scenario.windows]
        self.ledger = Ledger()
        self.reads = 0

    def start(self, turn_id: int, at: datetime, burn_per_min: float) -> None:
        self.ledger.start(turn_id, at, burn_per_min)

    def finish(self, turn_id: int, at: datetime, cost: float) -> None:
        self.ledger.finish(turn_id, at, cost)

    def read(self, now: datetime) -> QuotaReading:
        self.reads += 1
        return self.reading(now)

    def reading(self, now: datetime) -> QuotaReading:
        windows = []
        for name, period, budget, anchor in self.windows:
            begin, resets_at = window_bounds(anchor, period, now)
            dollars = self.ledger.spent(begin, now)
            windows.append(WindowReading(name, period.total_seconds(), dollars / budget, resets_at, budget, dollars))
        return QuotaReading(windows=windows, read_at=now)


class AccountsMeter:
    """A pool of accounts sharing the windows' reset schedule."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.accounts = list(scenario.accounts)
        self.ledgers = {a.name: Ledger() for a in self.accounts}
        self.placed: dict[int, str] = {}
        self.periods = {w.name: (w.period, w.first_reset) for w in scenario.windows}
        self.reads = 0

    def _reading(self, account: AccountSpec, now: datetime) -> tuple[str, float, float]:
        status, ext5, ext7 = "active", 0.0, 0.0
        for r in account.readings:
            if r.at > now:
                break
            status, ext5, ext7 = r.status, r.external_5h_pct, r.external_7d_pct
        return status, ext5 / 100.0, ext7 / 100.0

    def _bounds(self, name: str, now: datetime) -> tuple[datetime, datetime] | None:
        if name not in self.periods:
            return None
        period, anchor = self.periods[name]
        return window_bounds(anchor, period, now)

    def _utilization(self, account: AccountSpec, now: datetime) -> AccountReading:
        status, ext5, ext7 = self._reading(account, now)
        figures: dict[str, tuple[float | None, datetime | None]] = {}
        for name, capacity, external in (("5h", account.capacity_5h_usd, ext5), ("7d", account.capacity_7d_usd, ext7)):
            bounds = self._bounds(name, now)
            if bounds is None:
                figures[name] = (None, None)
                continue
            spent = self.ledgers[account.name].spent(bounds[0], now)
            figures[name] = (external + spent / capacity, bounds[1])
        u5, r5 = figures["5h"]
        u7, r7 = figures["7d"]
        if status == "active" and any(u is not None and u >= 1.0 for u in (u5, u7)):
            status = "quota_exceeded"  # what the provider reports once a window is full
        return AccountReading(account.name, status, u5, u7, r5, r7)

    def start(self, turn_id: int, at: datetime, burn_per_min: float) -> None:
        """Rotation: the turn lands on the active account with the most room on its fuller window."""
        readings = [self._utilization(a, at) for a in self.accounts]
        servable = [r for r in readings if r.status == "active"] or readings

        def fullest(r: AccountReading) -> float:
            return max(u for u in (r.utilization_5h, r.utilization_7d, 0.0) if u is not None)

        chosen = min(servable, key=fullest).name
        self.placed[turn_id] = chosen
        self.ledgers[chosen].start(turn_id, at, burn_per_min)

    def finish(self, turn_id: int, at: datetime, cost: float) -> None:
        name = self.placed.pop(turn_id, None)
        if name is not None:
            self.ledgers[name].finish(turn_id, at, cost)

    def read(self, now: datetime) -> QuotaReading | None:
        self.reads += 1
        readings = [self._utilization(a, now) for a in self.accounts]
        averages = pool_utilization(readings, now=now)
        if averages is None:
            return None
        windows = []
        for name, utilization, names, reset in (
            ("5h", averages.utilization_5h, averages.names_5h, averages.next_reset_5h),
            ("7d", averages.utilization_7d, averages.names_7d, averages.next_reset_7d),
        ):
            if utilization is None or name not in self.periods:
                continue
            members = [a for a in self.accounts if a.name in set(names)]
            capacity = sum(a.capacity_5h_usd if name == "5h" else a.capacity_7d_usd for a in members)
            period = self.periods[name][0]
            resets_at = reset or now + period
            windows.append(
                WindowReading(name, period.total_seconds(), utilization, resets_at, capacity, utilization * capacity)
            )
        return QuotaReading(windows=windows, accounts=readings, accounts_averaged=averages.averaged, read_at=now)


class Meter(Protocol):
    """What the fleet tells a meter and the gate asks of it (`bot/simulate/provider.py: build_meter`
    picks one for a scenario)."""

    reads: int

    def start(self, turn_id: int, at: datetime, burn_per_min: float) -> None: ...

    def finish(self, turn_id: int, at: datetime, cost: float) -> None: ...

    def read(self, now: datetime) -> QuotaReading | None: ...


__all__ = ["AccountsMeter", "Ledger", "LedgerMeter", "Meter"]
