"""The hold ladder (seed 001, "Consecutive holds back off"): a pure function of (reason, count).

Each consecutive hold doubles the interval from ten minutes until the reason's ceiling clamps
it: at_utilization_limit 10m, 20m, 40m, 60m, 60m…; fleet_at_cap 10m, 20m, 30m, 30m…. Jitter is
added after the ceiling, so a population pinned at the ceiling still spreads out.
"""

from __future__ import annotations

import random
from datetime import timedelta

FIRST = timedelta(minutes=10)
JITTER_MAX = timedelta(seconds=90)
CEILINGS: dict[str, timedelta] = {
    "at_utilization_limit": timedelta(hours=1),  # a window comes back down over hours
    "fleet_at_cap": timedelta(minutes=30),  # a slot frees whenever any session ends
}
DEFAULT_CEILING = timedelta(hours=1)


def next_delay(reason: str, count: int) -> timedelta:
    """The wait before the `count`-th consecutive hold's re-check (count >= 1), without jitter."""
    if count < 1:
        raise ValueError("count starts at 1: the first hold")
    ceiling = CEILINGS.get(reason, DEFAULT_CEILING)
    doubled: timedelta = FIRST * (2 ** min(count - 1, 16))
    return min(doubled, ceiling)


def jitter(rng: random.Random, limit: timedelta = JITTER_MAX) -> timedelta:
    """A little spread so sessions held in the same minute do not re-check in the same minute."""
    return timedelta(seconds=rng.uniform(0, limit.total_seconds()))


def rate_limit_delay(count: int) -> timedelta:
    """A provider rate limit with no stated reset: 5 minutes doubling to a 60-minute cap."""
    delay: timedelta = timedelta(minutes=5) * (2 ** min(max(count - 1, 0), 16))
    return min(delay, timedelta(minutes=60))
