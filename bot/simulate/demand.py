"""The demand a scenario describes, as one list of sessions to create: each batch arrival
expanded to its members, each Poisson generator drawn from the scenario's seed. Pure and
deterministic: the same scenario always yields the same demand, which is what lets three
policies be compared on exactly the same week. A `Tracked` is one demand once it is a session.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.simulate.scenario import ArrivalSpec, GeneratorSpec, Scenario


@dataclass(frozen=True)
class Demand:
    """One session to create at `at`, and the turns it will take."""

    index: int
    at: datetime
    genesis: str
    scheduling_class: str | None
    precedence: int | None
    runtime: str
    durations: tuple[timedelta, ...]  # the first turn, then each follow-up
    replies: tuple[datetime, ...] = ()  # when a person replies in its thread
    title: str = ""
    cost_cap_usd: float | None = None


@dataclass
class Tracked:
    """A session the simulator created, and what it still owes it."""

    demand: Demand
    session_id: int
    scheduling_class: str
    created_at: datetime
    planned: int  # turns planned (first + follow-ups)
    submitted: int = 0  # planned turns handed to submit_turn
    replies_due: int = 0  # replies inside the simulated span
    replies_sent: int = 0
    refused: list[str] = field(default_factory=list)


def expand(scenario: Scenario) -> list[Demand]:
    """Every session the scenario creates inside its span, in arrival order."""
    rng = random.Random(scenario.seed)
    raw: list[tuple[datetime, int, Demand]] = []
    for spec in scenario.arrivals:
        for member in _batch(spec):
            raw.append((member.at, len(raw), member))
    for generator in scenario.generators:
        for member in _poisson(generator, scenario, rng):
            raw.append((member.at, len(raw), member))
    ordered = [d for at, _, d in sorted(raw, key=lambda x: (x[0], x[1])) if scenario.start <= at < scenario.end]
    return [
        Demand(
            i,
            d.at,
            d.genesis,
            d.scheduling_class,
            d.precedence,
            d.runtime,
            d.durations,
            d.replies,
            d.title or f"{d.genesis} #{i}",
            d.cost_cap_usd,
        )
        for i, d in enumerate(ordered)
    ]


def _batch(spec: ArrivalSpec) -> list[Demand]:
    out = []
    for k in range(spec.count):
        at = spec.at + spec.every * k
        out.append(Demand(
            0, at, spec.genesis, spec.scheduling_class, spec.precedence, spec.runtime, spec.durations,
            tuple(at + offset for offset in spec.replies), spec.title, spec.cost_cap_usd,
        ))
    return out


def _poisson(spec: GeneratorSpec, scenario: Scenario, rng: random.Random) -> list[Demand]:
    begin = max(spec.start or scenario.start, scenario.start)
    end = min(spec.end or scenario.end, scenario.end)
    out: list[Demand] = []
    t = begin
    rate_per_second = spec.rate_per_hour / 3600.0
    while True:
        t = t + timedelta(seconds=rng.expovariate(rate_per_second))
        if t >= end:
            return out
        turns = rng.randint(spec.turns_min, spec.turns_max)
        durations = tuple(_uniform(rng, spec.duration_min, spec.duration_max) for _ in range(turns + 1))
        out.append(Demand(0, t, spec.genesis, spec.scheduling_class, spec.precedence, spec.runtime, durations,
                          cost_cap_usd=spec.cost_cap_usd))


def _uniform(rng: random.Random, low: timedelta, high: timedelta) -> timedelta:
    if low == high:
        return low
    return timedelta(seconds=rng.uniform(low.total_seconds(), high.total_seconds()))
