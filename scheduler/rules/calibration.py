"""Calibration: what a quota window is worth in dollars, priced from what Pacer spent against the
utilization the provider reported (seed 001, "Before the first calibration").

    obs = Observation(spent_usd=ledger_spend, utilization=pooled_fraction)
    capacity = calibrate([obs, ...])          # None: not measurable yet, fraction mode
    window = priced(window, capacity)         # a WindowReading with dollars, or unchanged
    window_sentence(window, now)              # never "$0.00" for a window with no price

The rule: an observation is measurable once the window shows at least MIN_UTILIZATION (5%) and
Pacer has recorded some spend in it. Its price is spend / utilization. Several observations
combine by their median.

Why 5%: providers report utilization coarsely (often whole percent). At 1% a rounding of half a
point is a 50% error in the price; at 5% it is 10%, and it shrinks as the window fills. Below
the floor the estimate would be noise presented as a measurement.

Why the median: one observation can be badly off — spend that landed just before a rollover,
another client spending on the same accounts, a stale reading. The median ignores a minority
of such outliers where a mean would be dragged by each of them.

Before a window is measurable it stays in fraction mode: every quantity is a fraction of the
window (capacity 1.0), the cap and the curve work the same, and only the burn-rate projection is
unavailable. No surface renders an unpriced window as $0.00.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from scheduler.ports import WindowReading
from scheduler.rules.pool import countdown
from templates import render

MIN_UTILIZATION = 0.05


@dataclass(frozen=True)
class Observation:
    """Pacer's spend inside a window, and the utilization the provider reported for it."""

    spent_usd: float
    utilization: float


def is_measurable(observation: Observation) -> bool:
    return observation.utilization >= MIN_UTILIZATION and observation.spent_usd > 0


def calibrate(observations: Iterable[Observation]) -> float | None:
    """The window's dollar capacity: the median of spend / utilization over the measurable
    observations, or None while there is none (the window stays in fraction mode)."""
    prices = [o.spent_usd / o.utilization for o in observations if is_measurable(o)]
    return statistics.median(prices) if prices else None


def priced(window: WindowReading, capacity_usd: float | None) -> WindowReading:
    """The window with a dollar capacity and the spend it implies; unchanged without one."""
    if capacity_usd is None:
        return window
    if capacity_usd <= 0:
        raise ValueError(f"capacity_usd must be above 0 (got {capacity_usd!r})")
    return replace(window, capacity_usd=capacity_usd, spent_usd=window.utilization * capacity_usd)


def is_calibrated(window: WindowReading) -> bool:
    return window.capacity_usd is not None


def window_sentence(window: WindowReading, now: datetime) -> str:
    """One line per window, saying which mode it is in."""
    return render("text/quota_window.j2", w=window, countdown=countdown(window.resets_at, now))


__all__ = [
    "MIN_UTILIZATION",
    "Observation",
    "calibrate",
    "is_calibrated",
    "is_measurable",
    "priced",
    "window_sentence",
]
