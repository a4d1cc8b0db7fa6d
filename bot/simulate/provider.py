"""Provider-reported windows in virtual time (P18): the windows a scenario marks `reported_by`
are read the way production's `agents` source reads them — by that very source.

    meter = build_meter(scenario)       # ProviderMeter when a window is reported_by, else as before
    reading = meter.read(now)           # the provider's utilization and reset, priced by calibration

What the provider counts is everything the account spends: Pacer's own turns (the ledger's
arithmetic, `LedgerMeter`) plus what other surfaces of the same account spend (`outside`), which
Pacer never records and only the provider's utilization shows. Its utilization is that sum over
the window's budget; at or past the budget the provider reports `rejected`.

Pacer hears the figure only in an agent's output: when a quota-spending turn starts, and then at
most every `reports_every` while one runs. With the fleet idle the last reading stands, going
stale while others spend, until its reset (then the ledger's estimate stands in, and says so).

Each heard figure goes into an in-memory book of `ProviderReading`s, and
`integrations.quota.agents.AgentsSource` reads it over the in-memory ledger: the same
`measure` (scheduler/rules/provider_windows.py) and the same calibration (capacity = Pacer's
spend since the window began / the provider's utilization, scheduler/rules/calibration.py) that
production runs. A window the scenario does not mark stays the ledger's, as before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from bot.simulate.meter import AccountsMeter, LedgerMeter, Meter
from bot.simulate.scenario import Scenario, WindowSpec
from integrations.quota.agents import KINDS, AgentsSource
from scheduler.front import AT_UTILIZATION_LIMIT, make_engine, window_bounds, window_label
from scheduler.ports import ProviderReading, QuotaReading

ACCOUNT = "sim"
MINUTE = timedelta(minutes=1)


@dataclass
class Heard:
    """What Pacer heard of one provider window over the run, for the report."""

    reports: int = 0
    last_capacity_usd: float | None = None  # what calibration priced the window at, last read
    min_capacity_usd: float | None = None
    max_capacity_usd: float | None = None
    fraction_reads: int = 0  # reads before calibration: the window in fraction mode
    fallback_reads: int = 0  # reads where the ledger's estimate stood in


class _Ledger:
    """The ledger side AgentsSource asks (`Estimates`): the in-memory ledger's windows and spend."""

    def __init__(self, meter: LedgerMeter) -> None:
        self.meter = meter

    def read_in(self, db: Any, now: datetime) -> QuotaReading:
        return self.meter.reading(now)

    def spend(self, db: Any, starts: Sequence[datetime], now: datetime) -> list[float]:
        return [self.meter.ledger.spent(start, now) for start in starts]


class _Book:
    """The agents' latest readings (`Readings`), one per window kind, in memory."""

    def __init__(self) -> None:
        self.kept: dict[str, ProviderReading] = {}

    def latest_in(self, db: Any) -> list[ProviderReading]:
        return list(self.kept.values())


class ProviderMeter:
    """The ledger's windows, with the `reported_by` ones as the provider reports them."""

    def __init__(self, scenario: Scenario) -> None:
        self.inner = LedgerMeter(scenario)
        self.provided = {w.name: w for w in scenario.windows if w.reported_by is not None}
        self.book = _Book()
        # AgentsSource opens its engine only in `read`; the meter calls `read_in` with no connection.
        self.source = AgentsSource(make_engine("sqlite://"), _Ledger(self.inner), self.book)
        self.heard = {name: Heard() for name in self.provided}
        self.last_report: dict[str, datetime] = {}
        self.reads = 0

    def start(self, turn_id: int, at: datetime, burn_per_min: float) -> None:
        self.inner.start(turn_id, at, burn_per_min)
        for w in self.provided.values():  # the agent's first event of its turn
            self._report(w, at)

    def finish(self, turn_id: int, at: datetime, cost: float) -> None:
        self.inner.finish(turn_id, at, cost)

    def provider_utilization(self, w: WindowSpec, now: datetime) -> float:
        """What the provider counts: Pacer's spend and everyone else's, over the window's budget."""
        begin, _ = window_bounds(w.first_reset, w.period, now)
        return (self.inner.ledger.spent(begin, now) + w.outside_usd(begin, now)) / float(w.budget_usd or 1.0)

    def _report(self, w: WindowSpec, now: datetime) -> None:
        utilization = self.provider_utilization(w, now)
        _, resets_at = window_bounds(w.first_reset, w.period, now)
        self.book.kept[w.name] = ProviderReading(
            provider=str(w.reported_by), kind=KINDS[w.name], observed_at=now,
            status="rejected" if utilization >= 1.0 else "allowed", utilization=utilization, resets_at=resets_at,
            account=ACCOUNT,
        )
        self.last_report[w.name] = now
        self.heard[w.name].reports += 1

    def read(self, now: datetime) -> QuotaReading:
        self.reads += 1
        if self.inner.ledger.running:  # an agent is running: its output carries the provider's figure
            for w in self.provided.values():
                last = self.last_report.get(w.name)
                if last is None or now - last >= w.reports_every:
                    self._report(w, now)
        reading = self.source.read_in(None, now)
        windows = []
        for window in reading.windows:
            if window.name not in self.provided:  # the ledger's by the scenario, not for want of a reading
                windows.append(replace(window, fallback=None))
                continue
            windows.append(window)
            heard = self.heard[window.name]
            if window.fallback is not None:
                heard.fallback_reads += 1
            elif window.capacity_usd is None:
                heard.fraction_reads += 1
            else:
                capacity = window.capacity_usd
                heard.last_capacity_usd = capacity
                heard.min_capacity_usd = min(capacity, heard.min_capacity_usd or capacity)
                heard.max_capacity_usd = max(capacity, heard.max_capacity_usd or capacity)
        return QuotaReading(windows=windows, read_at=now)


# --------------------------------------------------------------------------- the report


def outside_by_minute(w: WindowSpec, start: datetime, end: datetime, n: int) -> list[float]:
    """Dollars spent outside Pacer in each simulated minute of the run (none past its end)."""
    return [w.outside_usd(min(start + k * MINUTE, end), min(start + (k + 1) * MINUTE, end)) for k in range(n)]


def over_share(before: float, after: float, spent: float, line: float) -> float:
    """The share of one minute's spend (`before` -> `after`) that fell past `line`."""
    if before >= line:
        return 1.0
    return (after - line) / spent if after > line and spent > 0 else 0.0


@dataclass
class Past:
    """One instance of a provider window: Pacer's and others' dollars, and Pacer's dollars spent
    while the provider's count was past the window's whole budget (what it would refuse)."""

    pacer_usd: float = 0.0
    outside_usd: float = 0.0
    past_usd: float = 0.0
    spot_past_usd: float = 0.0

    def minute(self, before: float, pacer: float, spot: float, outside: float, capacity: float) -> None:
        share = over_share(before, before + pacer + outside, pacer + outside, capacity)
        self.pacer_usd += pacer
        self.outside_usd += outside
        self.past_usd += pacer * share
        self.spot_past_usd += spot * share

    def instance(self) -> dict[str, float]:
        return {"pacer_usd": round(self.pacer_usd, 2), "outside_usd": round(self.outside_usd, 2),
                "past_budget_usd": round(self.past_usd, 2), "spot_past_budget_usd": round(self.spot_past_usd, 2)}


def provider_report(meter: Meter, gate: Mapping[str, Counter[str]], w: WindowSpec,
                    instances: list[dict[str, Any]]) -> dict[str, Any]:
    """What the report adds for a provider window: who reported it, what others spent, what Pacer
    heard and how calibration priced it, and the gate deciding on it."""
    heard = meter.heard.get(w.name, Heard()) if isinstance(meter, ProviderMeter) else Heard()
    counts = gate.get(w.name, Counter())

    def total(key: str) -> float:
        return round(sum(float(i[key]) for i in instances), 2)

    def money(value: float | None) -> float | None:
        return None if value is None else round(value, 2)

    return {
        "reported_by": w.reported_by,
        "measured_by": w.reported_by,  # as the gate card's `_window_source.j2` names it
        "reports_every_minutes": w.reports_every / MINUTE,
        "pacer_usd": total("pacer_usd"),
        "outside_usd": total("outside_usd"),
        "past_budget_usd": total("past_budget_usd"),
        "spot_past_budget_usd": total("spot_past_budget_usd"),
        "provider_reports": heard.reports,
        "gate_capacity_usd": {"last": money(heard.last_capacity_usd), "min": money(heard.min_capacity_usd),
                              "max": money(heard.max_capacity_usd)},
        "fraction_reads": heard.fraction_reads,
        "fallback_reads": heard.fallback_reads,
        "holds": counts["held"],
        "pauses": counts["paused"],
        "as_reported": counts["as_reported"],
    }


def tally_gate(counts: Mapping[str, Counter[str]], event: str, context: Mapping[str, Any]) -> None:
    """Count a spot hold or pause the gate's budget or pace made (`held`, `paused`) against each
    provider window its sentence names, as a person reads it (the gate's "5-hour: ...", the
    flat-target baseline's "the 5h window"); `as_reported` counts those whose sentence says the
    figures are the provider's ("as ... reports it")."""
    if context.get("reason") != AT_UTILIZATION_LIMIT:
        return
    sentence = str(context.get("sentence") or "")
    for name, count in counts.items():
        if f"{window_label(name)}: " in sentence or f"the {name} window " in sentence:
            count[event] += 1
            count["as_reported"] += int(" reports it" in sentence)


def build_meter(scenario: Scenario) -> Meter:
    if scenario.accounts:
        return AccountsMeter(scenario)
    if any(w.reported_by is not None for w in scenario.windows):
        return ProviderMeter(scenario)
    return LedgerMeter(scenario)


__all__ = [
    "Heard", "Past", "ProviderMeter", "build_meter", "outside_by_minute", "over_share", "provider_report", "tally_gate",
]
