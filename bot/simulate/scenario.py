"""The scenario a simulation replays: a week of demand, a policy, the quota windows and what each
runtime burns. Parsed from decoded TOML by a strict validator — an unknown key or a bad value
is a ScenarioError naming it (`arrivals[3].count: must be a whole number >= 1`), and nothing
runs on a scenario that did not validate. The format is documented in docs/simulate.md.

    scenario = parse_scenario(tomllib.loads(text))
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from templates import error_text

POLICIES = ("pacer", "fifo", "flat-target")  # bot/simulate/policies.py says what each one is
WINDOW_NAMES = ("5h", "7d")  # the policy's two reserves are keyed by these names
ACCOUNT_STATUSES = ("active", "quota_exceeded", "needs_reauth")
PROVIDERS = ("anthropic", "openai")  # whose agents can report a window (`reported_by`)
MAX_BATCH = 100_000
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class ScenarioError(ValueError):
    """A scenario that cannot run; the message names the key and the rule it broke."""


@dataclass(frozen=True)
class PolicySpec:
    gating: bool = True
    reserve_5h_pct: float = 20.0
    reserve_7d_pct: float = 20.0
    max_sessions: int = 10
    agent_workers: int = 12
    preemption: bool = True
    demand_pacing: bool = True  # the pace holds only when the window's demand needs it (`scheduler.rules.demand`)
    flat_target_pct: float | None = None  # the flat-target baseline's target; None: 100 - reserve

    def reserve_pct(self, window: str) -> float:
        return self.reserve_7d_pct if window == "7d" else self.reserve_5h_pct

    def target_pct(self, window: str) -> float:
        return self.flat_target_pct if self.flat_target_pct is not None else 100.0 - self.reserve_pct(window)


@dataclass(frozen=True)
class WindowSpec:
    name: str
    period: timedelta
    budget_usd: float | None  # None in accounts mode: the pool's capacity is the accounts' sum
    first_reset: datetime
    # Provider-reported (P18): the agents report the window's utilization, which counts what other
    # surfaces of the account spend (`outside`: from each instant, dollars per hour), and Pacer
    # hears it only with an agent's output, at most every `reports_every` while one runs.
    reported_by: str | None = None
    outside: tuple[tuple[datetime, float], ...] = ()
    reports_every: timedelta = timedelta(minutes=5)

    def outside_usd(self, begin: datetime, end: datetime) -> float:
        """Dollars spent outside Pacer on this window's account from `begin` to `end`."""
        total = 0.0
        for k, (at, per_hour) in enumerate(self.outside):
            until = self.outside[k + 1][0] if k + 1 < len(self.outside) else end
            lo, hi = max(at, begin), min(until, end)
            if hi > lo:
                total += per_hour * (hi - lo).total_seconds() / 3600.0
        return total


@dataclass(frozen=True)
class RuntimeSpec:
    name: str
    burn_usd_per_min: float
    spends_quota: bool = True


@dataclass(frozen=True)
class ArrivalSpec:
    at: datetime
    genesis: str
    scheduling_class: str | None = None
    precedence: int | None = None
    runtime: str = "claude_code"
    durations: tuple[timedelta, ...] = (timedelta(minutes=30),)  # the first turn, then follow-ups
    count: int = 1
    every: timedelta = timedelta(0)
    replies: tuple[timedelta, ...] = ()  # human replies, offsets from the arrival
    title: str = ""
    cost_cap_usd: float | None = None  # each session's cost cap (P15)


@dataclass(frozen=True)
class GeneratorSpec:
    genesis: str
    rate_per_hour: float
    duration_min: timedelta
    duration_max: timedelta
    runtime: str = "claude_code"
    scheduling_class: str | None = None
    precedence: int | None = None
    turns_min: int = 0
    turns_max: int = 0
    start: datetime | None = None
    end: datetime | None = None
    cost_cap_usd: float | None = None  # each session's cost cap (P15)


@dataclass(frozen=True)
class AccountReadingSpec:
    at: datetime
    status: str = "active"
    external_5h_pct: float = 0.0  # what others spend on this account, as a share of its window
    external_7d_pct: float = 0.0


@dataclass(frozen=True)
class AccountSpec:
    name: str
    capacity_5h_usd: float
    capacity_7d_usd: float
    readings: tuple[AccountReadingSpec, ...] = ()


@dataclass(frozen=True)
class Scenario:
    name: str
    start: datetime
    duration: timedelta
    seed: int
    policy: PolicySpec
    windows: tuple[WindowSpec, ...]
    runtimes: tuple[RuntimeSpec, ...]
    arrivals: tuple[ArrivalSpec, ...] = ()
    generators: tuple[GeneratorSpec, ...] = ()
    accounts: tuple[AccountSpec, ...] = ()
    resume_overhead: timedelta = timedelta(minutes=2)

    @property
    def end(self) -> datetime:
        return self.start + self.duration

    def runtime(self, name: str) -> RuntimeSpec:
        return next(r for r in self.runtimes if r.name == name)

    def window(self, name: str) -> WindowSpec:
        return next(w for w in self.windows if w.name == name)

    def budget(self, name: str) -> float:
        """The window's capacity in dollars: its budget, or in accounts mode the accounts' sum."""
        w = self.window(name)
        if w.budget_usd is not None:
            return w.budget_usd
        return sum(a.capacity_5h_usd if name == "5h" else a.capacity_7d_usd for a in self.accounts)


# --------------------------------------------------------------------------- value parsers


def parse_duration(where: str, value: Any, *, allow_zero: bool = False) -> timedelta:
    """`90m`, `5h`, `7d`, `1h30m`, `45s`."""
    text = value.strip() if isinstance(value, str) else ""
    parts = _PART.findall(text)
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if not parts or "".join(n + u for n, u in parts) != text or (seconds <= 0 and not (allow_zero and seconds == 0)):
        raise ScenarioError(
            error_text("simulate_scenario/not_duration", where=where, allow_zero=allow_zero, value=value)
        )
    return timedelta(seconds=seconds)


def parse_instant(where: str, value: Any, start: datetime | None) -> datetime:
    """`+90m` (from the simulation's start) or an ISO-8601 instant with a UTC offset."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and value.strip().startswith("+") and start is not None:
        return start + parse_duration(where, value.strip()[1:], allow_zero=True)
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ScenarioError(error_text("simulate_scenario/not_instant", where=where, value=value)) from None
    else:
        raise ScenarioError(error_text("simulate_scenario/not_instant", where=where, value=value))
    if parsed.tzinfo is None:
        raise ScenarioError(error_text("simulate_scenario/not_instant", where=where, value=value, offset_missing=True))
    return parsed
