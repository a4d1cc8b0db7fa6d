"""Seed 000's QUEUE ladder, pure: the waiters in capacity-aware order and the bounded view of it
one selected waiter gets.

Order: the waiters nothing blocks now come first, then the parked ones — every entry is still
queued; "parked" is display context, not a status — by how far their blocker is from letting
them run, admission order (class, precedence, first in first out) kept inside each group:

    eligible      nothing on its record blocks it: it takes the next slot the queue pass offers
    capacity      a slot: its own capacity budget, the fleet's slots, its concurrency group
                  busy, a preemption or a person's park into the spot queue (a slot brings it back)
    budget        money: the quota windows (a hold or the ceiling's pause), a cost budget or cap
    prerequisite  other work first: a prerequisite, blocked interference, a wake still ahead
    hold          a hold someone or something must lift: an operator hold, a provider's queue
                  hold, the auth outage's park, and any reason this table does not know

A selected waiter's ladder (`around`) shows the front, up to two entries on either side of the
selected one and counts the gaps; a queue of at most seven shows every entry. Its "N ahead" is
the number of earlier ladder entries. It is current admission context, not an ETA.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from scheduler.rules.precedence import DEFAULT_PRECEDENCE

ELIGIBLE, CAPACITY, BUDGET, PREREQUISITE, HOLD = range(5)
GROUPS = ("eligible", "capacity", "budget", "prerequisite", "hold")

# The headline reason (`rules/waiting.py`) -> its group; a reason not named here is a hold.
SEVERITY: dict[str, int] = {
    # no blocker: a promotion overtook the record, a recovered turn due now, a priority deference window
    "overtaken_by_class": ELIGIBLE,
    "interrupted": ELIGIBLE,
    "deferring": ELIGIBLE,
    "within_limits": ELIGIBLE,
    "capacity": CAPACITY,
    "fleet_at_cap": CAPACITY,
    "concurrency_group": CAPACITY,
    "preempted_by_priority": CAPACITY,
    "user_spot_queue": CAPACITY,
    "at_utilization_limit": BUDGET,
    "cost_budget": BUDGET,
    "cost_cap": BUDGET,
    "prerequisite": PREREQUISITE,
    "blocked_interference": PREREQUISITE,
    "wake_me_up_later": PREREQUISITE,
    "asleep": PREREQUISITE,
}
MOST = 7  # a ladder this long or shorter shows every entry
SIDE = 2  # entries shown on either side of the selected one


def severity(reason: str | None) -> int:
    """How far a waiter's headline reason is from letting it run; None: nothing on its record."""
    if reason is None:
        return ELIGIBLE
    return SEVERITY.get(reason, HOLD)


@dataclass(frozen=True)
class Rung:
    """One waiter on the ladder: its id and the group its blocker puts it in."""

    id: int
    severity: int = ELIGIBLE

    @property
    def parked(self) -> bool:
        return self.severity > ELIGIBLE

    @property
    def group(self) -> str:
        return GROUPS[self.severity]


def order(rungs: Sequence[Rung]) -> list[Rung]:
    """`rungs` in admission order -> the ladder: eligible first, then parked by severity, the
    admission order kept inside each group (the sort is stable)."""
    return sorted(rungs, key=lambda rung: rung.severity)


def badges(*, capacity: int | None, multiplier: float | None, precedence: int, weight: float) -> tuple[str, ...]:
    """Seed 000's cN, pN and wN: only what differs from the default claim and place. An explicit
    zero weight shows as w0."""
    found: list[str] = []
    if capacity is not None:
        found.append(f"c{capacity}")
    elif multiplier is not None:
        found.append(f"c{multiplier:g}x")
    if precedence != DEFAULT_PRECEDENCE:
        found.append(f"p{precedence}")
    if weight != 1.0:
        found.append(f"w{weight:g}")
    return tuple(found)


T = TypeVar("T")


@dataclass(frozen=True)
class Step(Generic[T]):
    place: int  # 1-based on the ladder
    entry: T
    selected: bool = False


@dataclass(frozen=True)
class Gap:
    count: int  # entries not shown here


def around(ladder: Sequence[T], index: int, *, side: int = SIDE, most: int = MOST) -> list[Step[T] | Gap]:
    """The bounded ladder of the entry at `index` (0-based): every entry when there are at most
    `most`, else the front, `side` entries on either side of the selected one, and a `Gap` for
    each run left out."""
    if not 0 <= index < len(ladder):
        raise ValueError(f"index {index} is not on a ladder of {len(ladder)}")
    if len(ladder) <= most:
        shown = set(range(len(ladder)))
    else:
        shown = {0, *range(max(index - side, 0), min(index + side, len(ladder) - 1) + 1)}
    out: list[Step[T] | Gap] = []
    last = -1
    for i in sorted(shown):
        if i > last + 1:
            out.append(Gap(i - last - 1))
        out.append(Step(i + 1, ladder[i], i == index))
        last = i
    if last < len(ladder) - 1:
        out.append(Gap(len(ladder) - 1 - last))
    return out
