"""Burn rates: dollars per minute for each runtime + model, from what finished turns cost and how
long they ran (seed 001: the fleet's burn rate, the ten-minute projection, the burn-rate table).

Pure; the history arrives as plain rows (`integrations/quota/history.py` reads them from the
database in one aggregate query).

    table = burn_table(history, fallbacks=fallback_rates(echo_cost_usd=0.05, echo_seconds=2))
    rate = table.rate("claude_code", "opus")     # $/min
    ten_minutes = BurnTable.project(rate)        # dollars over the next ten minutes

A rate is total cost / total minutes over the most recent turns of that key, not a mean of
per-turn rates: a two-second turn that cost a cent would otherwise weigh as much as an hour-long
one, and the projection is about money over time. Lookup falls back from (runtime, model) to the
runtime across all its models, then to the runtime's configured fallback, then to 0.0 — the
last only for a runtime nothing is known about, which `lookup` reports as source "none".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

PROJECTION_MINUTES = 10.0
RECENT_TURNS = 50  # how many of each key's latest finished turns a rate is measured over


@dataclass(frozen=True)
class TurnCost:
    """What a group of finished turns (often one) of a runtime + model cost and how long it ran."""

    runtime: str
    model: str | None
    cost_usd: float
    seconds: float
    turns: int = 1


class RateSource(StrEnum):
    HISTORY = "history"  # measured on this exact runtime + model
    RUNTIME = "runtime"  # measured on the runtime, across its models
    FALLBACK = "fallback"  # configured, no history yet
    NONE = "none"  # nothing known: 0.0


@dataclass(frozen=True)
class BurnRate:
    runtime: str
    model: str | None
    usd_per_minute: float
    turns: int
    source: RateSource


class BurnTable:
    """Rates by (runtime, model), with the runtime-wide and configured fallbacks."""

    def __init__(
        self,
        measured: Mapping[tuple[str, str | None], BurnRate],
        fallbacks: Mapping[str, float] | None = None,
    ) -> None:
        self._measured = dict(measured)
        self._fallbacks = dict(fallbacks or {})

    def lookup(self, runtime: str, model: str | None = None) -> BurnRate:
        for key, source in (((runtime, model), RateSource.HISTORY), ((runtime, None), RateSource.RUNTIME)):
            found = self._measured.get(key)
            if found is not None:
                if key[1] is None and model is not None:
                    return BurnRate(runtime, model, found.usd_per_minute, found.turns, source)
                return found
        if runtime in self._fallbacks:
            return BurnRate(runtime, model, self._fallbacks[runtime], 0, RateSource.FALLBACK)
        return BurnRate(runtime, model, 0.0, 0, RateSource.NONE)

    def rate(self, runtime: str, model: str | None = None) -> float:
        """Dollars per minute a turn of this runtime + model is expected to burn."""
        return self.lookup(runtime, model).usd_per_minute

    @staticmethod
    def project(rate: float, minutes: float = PROJECTION_MINUTES) -> float:
        """Dollars a burn of `rate` $/min spends over `minutes`."""
        if minutes < 0:
            raise ValueError(f"minutes must be >= 0 (got {minutes!r})")
        return rate * minutes

    def rows(self) -> list[BurnRate]:
        """The measured per-model rates, then fallbacks with no history, for the burn table."""
        measured = sorted(
            (r for key, r in self._measured.items() if key[1] is not None),
            key=lambda r: (r.runtime, r.model or ""),
        )
        seen = {r.runtime for r in self._measured.values()}
        configured = [
            BurnRate(runtime, None, rate, 0, RateSource.FALLBACK)
            for runtime, rate in sorted(self._fallbacks.items())
            if runtime not in seen
        ]
        unmodelled = sorted(
            (r for key, r in self._measured.items() if key[1] is None and not self._has_models(key[0])),
            key=lambda r: r.runtime,
        )
        return measured + unmodelled + configured

    def _has_models(self, runtime: str) -> bool:
        return any(key[0] == runtime and key[1] is not None for key in self._measured)


def _rate(cost: float, seconds: float) -> float:
    return cost / (seconds / 60.0)


def burn_table(history: Iterable[TurnCost], fallbacks: Mapping[str, float] | None = None) -> BurnTable:
    """Sum cost and duration per (runtime, model) and per runtime; rows with no duration carry
    no rate (a turn that took no time says nothing about money over time)."""
    totals: dict[tuple[str, str | None], list[float]] = {}
    for row in history:
        if row.seconds <= 0 or row.cost_usd < 0:
            continue
        keys = [(row.runtime, None)] if row.model is None else [(row.runtime, row.model), (row.runtime, None)]
        for key in keys:
            acc = totals.setdefault(key, [0.0, 0.0, 0])
            acc[0] += row.cost_usd
            acc[1] += row.seconds
            acc[2] += row.turns
    measured = {
        key: BurnRate(
            key[0],
            key[1],
            _rate(cost, seconds),
            int(turns),
            RateSource.HISTORY if key[1] is not None else RateSource.RUNTIME,
        )
        for key, (cost, seconds, turns) in totals.items()
    }
    return BurnTable(measured, fallbacks)


def fallback_rates(*, echo_cost_usd: float, echo_seconds: float) -> dict[str, float]:
    """The built-in echo agent's rate, known from its settings before it has run at all. An echo
    turn that takes no time has no rate, so none is offered."""
    if echo_seconds <= 0:
        return {}
    return {"echo": _rate(echo_cost_usd, echo_seconds)}


__all__ = [
    "PROJECTION_MINUTES",
    "RECENT_TURNS",
    "BurnRate",
    "BurnTable",
    "RateSource",
    "TurnCost",
    "burn_table",
    "fallback_rates",
]
