"""What the gate decides on: plain frozen values, built once per decision from the database and
the quota source. The gate itself never touches either.

Units: a calibrated window counts dollars; a window in fraction mode counts fractions of the
window (capacity 1.0) and has no burn-rate projection (seed 001, "Before the first calibration").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from scheduler.rules.demand import Deferred, Demand
from scheduler.rules.genesis import Genesis, SchedulingClass
from scheduler.rules.top_up import TopUpPolicy


@dataclass(frozen=True)
class PolicyView:
    """A plain, immutable copy of the policy row for decisions."""

    gating_enabled: bool
    reserve_5h_pct: float
    reserve_7d_pct: float
    max_sessions: int
    preemption_enabled: bool
    overrides: Mapping[Genesis, SchedulingClass]
    cost_budgets: Mapping[str, float] = field(default_factory=dict)  # runtime -> US dollars
    spend_reset_at: Mapping[str, datetime] = field(default_factory=dict)  # runtime -> its spend counts from
    max_sessions_override: int | None = None  # a temporary max sessions, until its expiry clears it
    max_sessions_override_until: datetime | None = None
    top_up: TopUpPolicy = TopUpPolicy()
    demand_pacing: bool = True  # the pace holds only when the window's demand needs it (`rules.demand`)
    overage_spot: bool = False  # spot work may run on the provider's overage, counted as spend; off: refused
    window_reserves: Mapping[str, float] = field(default_factory=dict)  # a per-model bucket's own reserve %

    def reserve_pct(self, window: str) -> float:
        """A window's reserve: its own where the policy sets one (a per-model weekly bucket such as
        "7d_opus"), else its kind's default: the 7-day one for every weekly window, the 5-hour one
        for the rest."""
        if window in self.window_reserves:
            return self.window_reserves[window]
        return self.reserve_7d_pct if window == "7d" or window.startswith("7d_") else self.reserve_5h_pct

    @property
    def effective_max(self) -> int:
        """Seed 000: an active temporary value first, the configured one second."""
        return self.max_sessions_override if self.max_sessions_override is not None else self.max_sessions

    def slots(self, agent_workers: int) -> int:
        """The slots that bind: the agent workers bound the ceiling whatever the setting says
        (seed 001, "What the ceiling counts": min(configured, the agent workers))."""
        return min(self.effective_max, agent_workers)


def window_label(name: str) -> str:
    """How a sentence names a window."""
    if name.startswith("7d_"):
        return f"weekly {name[3:].capitalize()}"  # a per-model bucket the provider counts apart
    return {"5h": "5-hour", "7d": "weekly"}.get(name, name)


@dataclass(frozen=True)
class WindowState:
    name: str  # "5h" | "7d" | a per-model weekly bucket such as "7d_opus"
    period: timedelta
    resets_at: datetime
    capacity: float  # dollars when calibrated; 1.0 in fraction mode
    spent: float  # same unit as capacity
    calibrated: bool
    read_at: datetime | None = None  # when `spent` was true: spend since then is in no reading yet
    measured_by: str | None = None  # the provider, when the figures are its own word
    fallback: str | None = None  # why the ledger's estimate stands in for it
    using_overage: bool = False  # the provider says an account spends overage (extra usage) on it
    accounts: int = 0  # the accounts the provider's figures were read from
    buckets: int = 0  # the distinct buckets among them (accounts sharing one bucket count once)

    @property
    def label(self) -> str:
        return window_label(self.name)


@dataclass(frozen=True)
class FleetTurn:
    """A turn a worker is executing now — the only population the ceilings count."""

    session_id: int
    is_spot: bool
    spends_quota: bool
    burn_per_min: float  # dollars per minute
    weight: float = 1.0  # its claim on the slot budget (seed 000)


@dataclass(frozen=True)
class Asking:
    """The session asking for a turn."""

    session_id: int
    is_spot: bool
    already_running: bool
    spends_quota: bool
    burn_per_min: float  # its projected dollars per minute
    weight: float = 1.0  # its claim on the slot budget (seed 000)
    capacity: int | None = None  # its own authored budget, replacing the fleet's slots
    capacity_multiplier: float | None = None  # or its budget as a multiple of the slots


@dataclass(frozen=True)
class Snapshot:
    policy: PolicyView
    windows: tuple[WindowState, ...] | None  # None: no quota reading to decide on
    fleet: tuple[FleetTurn, ...] = ()
    agent_workers: int = 12
    pool: Any = None  # scheduler.rules.pool.PoolCapacity when the source reads accounts
    accounts_averaged: int = 0
    demand: Demand | Deferred[Demand] | None = None  # what the window can still be asked for; None: unknown
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def effective_slots(self) -> int:
        return self.policy.slots(self.agent_workers)

    @property
    def slots_unreachable(self) -> bool:
        """The configured max is above the agent workers, so it can never bind."""
        return self.policy.effective_max > self.agent_workers
