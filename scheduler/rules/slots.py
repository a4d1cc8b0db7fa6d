"""The slot budget as weighted claims (seed 000, "Agent queued for a runner slot"), pure.

A session claims `weight` units (default 1.0; 0 allowed). The fleet's load is the sum of the
claims of the turns running now. The budget a session is admitted against is the fleet's slots,
unless it authored its own: a whole number (`capacity`) replaces it for that session's own
admission, a multiplier scales it. A claim fits when load + weight stays within that budget; a
zero weight adds no load and waits only while the fleet is exactly full or over-committed.
"""

from __future__ import annotations

TOLERANCE = 1e-9  # weights are floats: 0.1 + 0.2 must fit a budget of 0.3


def budget_for(slots: int, capacity: int | None = None, multiplier: float | None = None) -> float:
    """The budget one session's admission is decided against."""
    if capacity is not None:
        return float(capacity)
    if multiplier is not None:
        return multiplier * slots
    return float(slots)


def fits(load: float, weight: float, budget: float) -> bool:
    """Whether a claim of `weight` fits beside `load` in `budget`."""
    if weight <= 0:
        return load < budget - TOLERANCE
    return load + weight <= budget + TOLERANCE


def is_full(load: float, slots: int) -> bool:
    """No claim against the fleet's own budget fits, not even a zero weight."""
    return not fits(load, 0.0, float(slots))
