"""The strict validator: decoded TOML in, a `Scenario` out, or a ScenarioError naming the first
key that broke a rule. Each section's keys are listed once, here, and docs/simulate.md mirrors
them.

    scenario = parse_scenario(tomllib.loads(text), name="saturated")
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from bot.simulate.scenario import (
    ACCOUNT_STATUSES,
    MAX_BATCH,
    PROVIDERS,
    WINDOW_NAMES,
    AccountReadingSpec,
    AccountSpec,
    ArrivalSpec,
    GeneratorSpec,
    PolicySpec,
    RuntimeSpec,
    Scenario,
    ScenarioError,
    WindowSpec,
    parse_duration,
    parse_instant,
)
from scheduler.front import Genesis, SchedulingClass
from templates import error_text

TOP = ("simulation", "policy", "windows", "runtimes", "arrivals", "generators", "accounts")
SIMULATION = ("start", "duration", "seed", "resume_overhead", "name")
POLICY = (
    "gating",
    "reserve_5h_pct",
    "reserve_7d_pct",
    "max_sessions",
    "agent_workers",
    "preemption",
    "demand_pacing",
    "flat_target_pct",
)
WINDOW = (
    "name", "period", "budget_usd", "first_reset", "reported_by", "outside_usd_per_hour", "outside", "reports_every",
)
PROVIDER_KEYS = ("outside_usd_per_hour", "outside", "reports_every")  # only with reported_by
OUTSIDE = ("at", "usd_per_hour")
RUNTIME = ("name", "burn_usd_per_min", "spends_quota")
ARRIVAL = (
    "at",
    "genesis",
    "class",
    "precedence",
    "runtime",
    "duration",
    "count",
    "every",
    "turns",
    "replies",
    "title",
    "cost_cap_usd",
)
GENERATOR = (
    "genesis",
    "rate_per_hour",
    "duration",
    "runtime",
    "class",
    "precedence",
    "turns",
    "start",
    "end",
    "cost_cap_usd",
)
ACCOUNT = ("name", "capacity_5h_usd", "capacity_7d_usd", "readings")
READING = ("at", "status", "external_5h_pct", "external_7d_pct")
MAX_TURNS = 1000


def parse_scenario(data: Mapping[str, Any], *, name: str = "scenario") -> Scenario:
    top = _table("scenario", data, TOP, required=("simulation", "windows", "runtimes"))
    sim = _table("simulation", top["simulation"], SIMULATION, required=("start", "duration"))
    start = parse_instant("simulation.start", sim["start"], None)
    duration = parse_duration("simulation.duration", sim["duration"])
    seed = _integer("simulation.seed", sim.get("seed", 1))
    overhead = parse_duration("simulation.resume_overhead", sim.get("resume_overhead", "2m"), allow_zero=True)
    title = _text("simulation.name", sim["name"]) if "name" in sim else name
    policy = _policy(top.get("policy", {}))
    accounts = tuple(
        _account(f"accounts[{i}]", a, start) for i, a in enumerate(_array("accounts", top.get("accounts")))
    )
    windows = _windows(top["windows"], start, accounts_mode=bool(accounts))
    runtimes = tuple(_runtime(f"runtimes[{i}]", r) for i, r in enumerate(_array("runtimes", top["runtimes"])))
    if not runtimes:
        raise ScenarioError(error_text("simulate_scenario/no_runtimes"))
    names = [r.name for r in runtimes]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise ScenarioError(error_text("simulate_scenario/repeated", where=f"runtimes[{i}].name", value=n))
    arrivals = tuple(
        _arrival(f"arrivals[{i}]", a, start, names) for i, a in enumerate(_array("arrivals", top.get("arrivals")))
    )
    generators = tuple(
        _generator(f"generators[{i}]", g, start, names)
        for i, g in enumerate(_array("generators", top.get("generators")))
    )
    return Scenario(title, start, duration, seed, policy, windows, runtimes, arrivals, generators, accounts, overhead)


def _policy(raw: Any) -> PolicySpec:
    p = _table("policy", raw, POLICY)
    base = PolicySpec()
    target = p.get("flat_target_pct")
    return PolicySpec(
        gating=_flag("policy.gating", p.get("gating", base.gating)),
        reserve_5h_pct=_number("policy.reserve_5h_pct", p.get("reserve_5h_pct", base.reserve_5h_pct), high=100),
        reserve_7d_pct=_number("policy.reserve_7d_pct", p.get("reserve_7d_pct", base.reserve_7d_pct), high=100),
        max_sessions=_whole("policy.max_sessions", p.get("max_sessions", base.max_sessions), low=1),
        agent_workers=_whole("policy.agent_workers", p.get("agent_workers", base.agent_workers), low=1),
        preemption=_flag("policy.preemption", p.get("preemption", base.preemption)),
        demand_pacing=_flag("policy.demand_pacing", p.get("demand_pacing", base.demand_pacing)),
        flat_target_pct=None if target is None else _number("policy.flat_target_pct", target, high=100, above=True),
    )


def _windows(raw: Any, start: datetime, *, accounts_mode: bool) -> tuple[WindowSpec, ...]:
    items = _array("windows", raw)
    if not items:
        raise ScenarioError(error_text("simulate_scenario/no_windows"))
    windows: list[WindowSpec] = []
    for i, item in enumerate(items):
        at = f"windows[{i}]"
        required = ("name", "period", "first_reset") + (() if accounts_mode else ("budget_usd",))
        w = _table(at, item, WINDOW, required=required)
        if w["name"] not in WINDOW_NAMES:
            raise ScenarioError(
                error_text("simulate_scenario/window_name", where=f"{at}.name", names=WINDOW_NAMES, value=w["name"])
            )
        if any(x.name == w["name"] for x in windows):
            raise ScenarioError(error_text("simulate_scenario/repeated", where=f"{at}.name", value=w["name"]))
        if accounts_mode and "budget_usd" in w:
            raise ScenarioError(error_text("simulate_scenario/budget_with_accounts", where=f"{at}.budget_usd"))
        period = parse_duration(f"{at}.period", w["period"])
        first = parse_instant(f"{at}.first_reset", w["first_reset"], start)
        if not start < first <= start + period:
            raise ScenarioError(
                error_text("simulate_scenario/first_reset", where=f"{at}.first_reset", value=w["first_reset"])
            )
        budget = None if accounts_mode else _number(f"{at}.budget_usd", w["budget_usd"], above=True)
        windows.append(WindowSpec(str(w["name"]), period, budget, first, *_provider(at, w, start, accounts_mode)))
    return tuple(windows)


def _provider(
    at: str, w: Mapping[str, Any], start: datetime, accounts_mode: bool
) -> tuple[str | None, tuple[tuple[datetime, float], ...], timedelta]:
    """A provider-reported window's keys: who reports it, what others spend, how often it is heard."""
    if "reported_by" not in w:
        for key in PROVIDER_KEYS:
            if key in w:
                raise ScenarioError(error_text("simulate_scenario/needs_reported_by", where=f"{at}.{key}"))
        return None, (), WindowSpec.reports_every
    provider = w["reported_by"]
    if provider not in PROVIDERS:
        raise ScenarioError(
            error_text("simulate_scenario/not_one_of", where=f"{at}.reported_by", allowed=PROVIDERS, value=provider)
        )
    if accounts_mode:
        raise ScenarioError(error_text("simulate_scenario/reported_with_accounts", where=f"{at}.reported_by"))
    rate = _number(f"{at}.outside_usd_per_hour", w.get("outside_usd_per_hour", 0.0), high=1_000_000)
    changes = []
    for j, item in enumerate(_array(f"{at}.outside", w.get("outside"))):
        where = f"{at}.outside[{j}]"
        o = _table(where, item, OUTSIDE, required=OUTSIDE)
        changes.append((
            parse_instant(f"{where}.at", o["at"], start),
            _number(f"{where}.usd_per_hour", o["usd_per_hour"], high=1_000_000),
        ))
    outside = tuple(sorted([(start, rate), *changes], key=lambda c: c[0]))
    every = parse_duration(f"{at}.reports_every", w["reports_every"]) if "reports_every" in w else (
        WindowSpec.reports_every
    )
    return str(provider), outside, every


def _runtime(at: str, raw: Any) -> RuntimeSpec:
    r = _table(at, raw, RUNTIME, required=("name", "burn_usd_per_min"))
    return RuntimeSpec(
        _text(f"{at}.name", r["name"]),
        _number(f"{at}.burn_usd_per_min", r["burn_usd_per_min"]),
        _flag(f"{at}.spends_quota", r.get("spends_quota", True)),
    )


def _runtime_name(where: str, value: Any, names: list[str]) -> str:
    if value not in names:
        raise ScenarioError(error_text("simulate_scenario/runtime_unknown", where=where, names=names, value=value))
    return str(value)


def _arrival(at: str, raw: Any, start: datetime, runtimes: list[str]) -> ArrivalSpec:
    a = _table(at, raw, ARRIVAL, required=("at", "genesis"))
    count = _whole(f"{at}.count", a.get("count", 1), low=1, high=MAX_BATCH)
    every = parse_duration(f"{at}.every", a["every"], allow_zero=True) if "every" in a else timedelta(0)
    raw_duration = a.get("duration", "30m")
    if isinstance(raw_duration, list):
        if "turns" in a:
            raise ScenarioError(error_text("simulate_scenario/turns_with_list", where=f"{at}.turns"))
        if not raw_duration:
            raise ScenarioError(error_text("simulate_scenario/empty_duration_list", where=f"{at}.duration"))
        durations = tuple(parse_duration(f"{at}.duration[{j}]", d) for j, d in enumerate(raw_duration))
    else:
        turns = _whole(f"{at}.turns", a.get("turns", 0), low=0, high=MAX_TURNS)
        durations = (parse_duration(f"{at}.duration", raw_duration),) * (turns + 1)
    replies = a.get("replies", [])
    if not isinstance(replies, list):
        raise ScenarioError(error_text("simulate_scenario/replies_not_list", where=f"{at}.replies", value=replies))
    offsets = []
    for j, r in enumerate(replies):
        if not isinstance(r, str) or not r.startswith("+"):
            raise ScenarioError(error_text("simulate_scenario/reply_not_offset", where=f"{at}.replies[{j}]", value=r))
        offsets.append(parse_duration(f"{at}.replies[{j}]", r[1:], allow_zero=True))
    return ArrivalSpec(
        at=parse_instant(f"{at}.at", a["at"], start),
        genesis=_genesis(f"{at}.genesis", a["genesis"]),
        scheduling_class=_class(f"{at}.class", a.get("class")),
        precedence=_integer(f"{at}.precedence", a["precedence"]) if "precedence" in a else None,
        runtime=_runtime_name(f"{at}.runtime", a.get("runtime", runtimes[0]), runtimes),
        durations=durations,
        count=count,
        every=every,
        replies=tuple(offsets),
        title=_text(f"{at}.title", a["title"]) if "title" in a else "",
        cost_cap_usd=_cap(f"{at}.cost_cap_usd", a),
    )


def _generator(at: str, raw: Any, start: datetime, runtimes: list[str]) -> GeneratorSpec:
    g = _table(at, raw, GENERATOR, required=("genesis", "rate_per_hour", "duration"))
    low, high = _range(f"{at}.duration", g["duration"], parse_duration)
    turns_low, turns_high = _range(f"{at}.turns", g.get("turns", 0), lambda w, v: _whole(w, v, high=MAX_TURNS))
    begin = parse_instant(f"{at}.start", g["start"], start) if "start" in g else None
    end = parse_instant(f"{at}.end", g["end"], start) if "end" in g else None
    if begin is not None and end is not None and end <= begin:
        raise ScenarioError(error_text("simulate_scenario/end_before_start", end=f"{at}.end", start=f"{at}.start"))
    return GeneratorSpec(
        genesis=_genesis(f"{at}.genesis", g["genesis"]),
        rate_per_hour=_number(f"{at}.rate_per_hour", g["rate_per_hour"], above=True, high=100_000),
        duration_min=low,
        duration_max=high,
        runtime=_runtime_name(f"{at}.runtime", g.get("runtime", runtimes[0]), runtimes),
        scheduling_class=_class(f"{at}.class", g.get("class")),
        precedence=_integer(f"{at}.precedence", g["precedence"]) if "precedence" in g else None,
        turns_min=turns_low,
        turns_max=turns_high,
        start=begin,
        end=end,
        cost_cap_usd=_cap(f"{at}.cost_cap_usd", g),
    )


def _account(at: str, raw: Any, start: datetime) -> AccountSpec:
    a = _table(at, raw, ACCOUNT, required=("name", "capacity_5h_usd", "capacity_7d_usd"))
    readings = []
    for j, item in enumerate(_array(f"{at}.readings", a.get("readings"))):
        where = f"{at}.readings[{j}]"
        r = _table(where, item, READING, required=("at",))
        status = r.get("status", "active")
        if status not in ACCOUNT_STATUSES:
            raise ScenarioError(
                error_text(
                    "simulate_scenario/not_one_of", where=f"{where}.status", allowed=ACCOUNT_STATUSES, value=status
                )
            )
        readings.append(AccountReadingSpec(
            parse_instant(f"{where}.at", r["at"], start),
            str(status),
            _number(f"{where}.external_5h_pct", r.get("external_5h_pct", 0.0), high=100),
            _number(f"{where}.external_7d_pct", r.get("external_7d_pct", 0.0), high=100),
        ))
    return AccountSpec(
        _text(f"{at}.name", a["name"]),
        _number(f"{at}.capacity_5h_usd", a["capacity_5h_usd"], above=True),
        _number(f"{at}.capacity_7d_usd", a["capacity_7d_usd"], above=True),
        tuple(sorted(readings, key=lambda r: r.at)),
    )


# --------------------------------------------------------------------------- value readers


def _cap(where: str, table: Mapping[str, Any]) -> float | None:
    """A session's cost cap in US dollars, as `/pacer new --cap` takes it: above 0."""
    return _number(where, table["cost_cap_usd"], above=True, high=1_000_000) if "cost_cap_usd" in table else None


def _number(where: str, value: Any, *, low: float = 0.0, high: float | None = None, above: bool = False) -> float:
    if (
        isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value)
        or (value <= low if above else value < low) or (high is not None and value > high)
    ):
        raise ScenarioError(
            error_text("simulate_scenario/not_number", where=where, low=low, high=high, above=above, value=value)
        )
    return float(value)


def _whole(where: str, value: Any, *, low: int = 0, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        raise ScenarioError(error_text("simulate_scenario/not_whole", where=where, low=low, high=high, value=value))
    return value


def _integer(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(error_text("simulate_scenario/not_integer", where=where, value=value))
    return value


def _flag(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(error_text("simulate_scenario/not_flag", where=where, value=value))
    return value


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError(error_text("simulate_scenario/not_text", where=where, value=value))
    return value.strip()


def _genesis(where: str, value: Any) -> str:
    allowed = [g.value for g in Genesis]
    if value not in allowed:
        raise ScenarioError(error_text("simulate_scenario/not_one_of", where=where, allowed=allowed, value=value))
    return str(value)


def _class(where: str, value: Any) -> str | None:
    if value is None:
        return None
    allowed = [c.value for c in SchedulingClass]
    if value not in allowed:
        raise ScenarioError(error_text("simulate_scenario/not_one_of", where=where, allowed=allowed, value=value))
    return str(value)


def _table(where: str, value: Any, allowed: Sequence[str], required: Sequence[str] = ()) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScenarioError(error_text("simulate_scenario/not_table", where=where, value=value))
    for key in value:
        if key not in allowed:
            raise ScenarioError(error_text("simulate_scenario/key_unknown", where=where, key=key, allowed=allowed))
    for key in required:
        if key not in value:
            raise ScenarioError(error_text("simulate_scenario/key_required", where=where, key=key))
    return value


def _array(where: str, value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ScenarioError(error_text("simulate_scenario/not_array", where=where, value=value))
    return value


def _range(where: str, value: Any, parse: Any) -> tuple[Any, Any]:
    """A fixed value, or [low, high]."""
    if isinstance(value, list):
        if len(value) != 2:
            raise ScenarioError(error_text("simulate_scenario/not_range", where=where, value=value))
        low, high = parse(f"{where}[0]", value[0]), parse(f"{where}[1]", value[1])
        if high < low:
            raise ScenarioError(error_text("simulate_scenario/range_reversed", where=where, value=value))
        return low, high
    one = parse(where, value)
    return one, one
