"""The scenario a simulation replays: a week of demand, a policy, the quota windows and what each
runtime burns. Parsed from decoded TOML by a strict validator — an unknown key or a bad value
is a ScenarioError naming it (`arrivals[3].count: must be a whole number >= 1`), and nothing
runs on a scenario that did not validate. The format is documented in docs/simulate.md.

    scenario = parse_scenario(tomllib.loads(text))
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scheduler.genesis import Genesis, SchedulingClass

POLICIES = ("pacer", "fifo", "flat-target")  # bot/simulate/policies.py says what each one is
WINDOW_NAMES = ("5h", "7d")  # the policy's two reserves are keyed by these names
ACCOUNT_STATUSES = ("active", "quota_exceeded", "needs_reauth")
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
    rule = "a duration such as 90m, 5h, 7d or 1h30m" + ("" if allow_zero else " (above zero)")
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError(f"{where}: must be {rule} (got {value!r})")
    text = value.strip()
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ScenarioError(f"{where}: must be {rule} (got {value!r})")
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0 and not (allow_zero and seconds == 0):
        raise ScenarioError(f"{where}: must be {rule} (got {value!r})")
    return timedelta(seconds=seconds)


def parse_instant(where: str, value: Any, start: datetime | None) -> datetime:
    """`+90m` (from the simulation's start) or an ISO-8601 instant with a UTC offset."""
    rule = "+<duration> from the start (e.g. +90m) or an ISO-8601 instant with an offset"
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and value.strip().startswith("+") and start is not None:
        return start + parse_duration(where, value.strip()[1:], allow_zero=True)
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ScenarioError(f"{where}: must be {rule} (got {value!r})") from None
    else:
        raise ScenarioError(f"{where}: must be {rule} (got {value!r})")
    if parsed.tzinfo is None:
        raise ScenarioError(f"{where}: must be {rule} (got {value!r}, which has no offset)")
    return parsed


def _number(where: str, value: Any, *, low: float = 0.0, high: float | None = None, above: bool = False) -> float:
    bound = f"above {low:g}" if above else f">= {low:g}"
    rule = f"a number {bound}" + (f" and <= {high:g}" if high is not None else "")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value):
        raise ScenarioError(f"{where}: must be {rule} (got {value!r})")
    if (value <= low if above else value < low) or (high is not None and value > high):
        raise ScenarioError(f"{where}: must be {rule} (got {value!r})")
    return float(value)


def _whole(where: str, value: Any, *, low: int = 0, high: int | None = None) -> int:
    rule = f"a whole number >= {low}" + (f" and <= {high}" if high is not None else "")
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        raise ScenarioError(f"{where}: must be {rule} (got {value!r})")
    return value


def _integer(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{where}: must be a whole number (got {value!r})")
    return value


def _flag(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(f"{where}: must be true or false (got {value!r})")
    return value


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError(f"{where}: must be a non-empty string (got {value!r})")
    return value.strip()


def _genesis(where: str, value: Any) -> str:
    allowed = [g.value for g in Genesis]
    if value not in allowed:
        raise ScenarioError(f"{where}: must be one of {', '.join(allowed)} (got {value!r})")
    return str(value)


def _class(where: str, value: Any) -> str | None:
    if value is None:
        return None
    allowed = [c.value for c in SchedulingClass]
    if value not in allowed:
        raise ScenarioError(f"{where}: must be one of {', '.join(allowed)} (got {value!r})")
    return str(value)


def _table(where: str, value: Any, allowed: Sequence[str], required: Sequence[str] = ()) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScenarioError(f"{where}: must be a table (got {value!r})")
    for key in value:
        if key not in allowed:
            raise ScenarioError(f"{where}.{key}: is not a key here; allowed: {', '.join(allowed)}")
    for key in required:
        if key not in value:
            raise ScenarioError(f"{where}.{key}: is required")
    return value


def _array(where: str, value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ScenarioError(f"{where}: must be an array of tables ([[{where}]]) (got {value!r})")
    return value


def _range(where: str, value: Any, parse: Any) -> tuple[Any, Any]:
    """A fixed value, or [low, high]."""
    if isinstance(value, list):
        if len(value) != 2:
            raise ScenarioError(f"{where}: must be one value or a [low, high] pair (got {value!r})")
        low, high = parse(f"{where}[0]", value[0]), parse(f"{where}[1]", value[1])
        if high < low:
            raise ScenarioError(f"{where}: the high end must not be below the low end (got {value!r})")
        return low, high
    one = parse(where, value)
    return one, one
