"""Precedence: ranking the spot queue (seed 001: "Precedence", "Placing something at the head
of the queue", "The Ranked view"). Pure arithmetic over plain values.

Higher runs sooner, on an absolute sparse scale; ties break oldest first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from scheduler.errors import InvalidInput
from templates import error_text

SLOT_GAP = 5
DEFAULT_PRECEDENCE = 0
TOP_OF_SPOT = "top_of_spot"


def above_top_spot(
    spot_precedences: Iterable[int], *, current: int | None = None
) -> int:
    """SLOT_GAP above the highest non-archived spot session, read live.

    The instance form passes `current` (the session's own rank) and leaves the session itself
    out of `spot_precedences`: the result is floored at `current`, so re-placing a session that
    is already first is a no-op rather than a walk upward or a drop below a priority row.
    """
    values = list(spot_precedences)
    target = (max(values) + SLOT_GAP) if values else DEFAULT_PRECEDENCE + SLOT_GAP
    return target if current is None else max(target, current)


def resolve_placement(
    *, precedence: int | None, place: str | None, field: str = "place"
) -> str | int | None:
    """`place` and `precedence` are two answers to one question: both is an error."""
    if precedence is not None and place is not None:
        raise InvalidInput(error_text("precedence/precedence_and_place"), field=field)
    if place is not None:
        if place != TOP_OF_SPOT:
            raise InvalidInput(error_text("precedence/place_unknown", field=field, place=place), field=field)
        return TOP_OF_SPOT
    return precedence


def spawn_precedence(parent_precedence: int | None, *, bookkeeping: bool = False) -> int:
    """A spawn lands one above its parent; a bookkeeping fork takes the default."""
    if bookkeeping or parent_precedence is None:
        return DEFAULT_PRECEDENCE
    return parent_precedence + 1


@dataclass(frozen=True)
class Reorder:
    """The result of dropping a row between two neighbours."""

    value: int
    upper_neighbour: int | None  # new value for the higher neighbour, when nudged
    lower_neighbour: int | None  # new value for the lower neighbour, when nudged


def between(upper: int | None, lower: int | None) -> Reorder:
    """Place a row between `upper` (the row above it, higher precedence) and `lower`.

    The midpoint when one exists; between adjacent or equal values the neighbours are nudged
    one apart each and the row takes the middle (21 and 20 become 22 and 19, the row 20).
    With one neighbour missing the row lands SLOT_GAP beyond the other.
    """
    if upper is None and lower is None:
        return Reorder(DEFAULT_PRECEDENCE, None, None)
    if upper is None:
        assert lower is not None
        return Reorder(lower + SLOT_GAP, None, None)
    if lower is None:
        return Reorder(upper - SLOT_GAP, None, None)
    if upper < lower:
        raise InvalidInput(error_text("precedence/between_inverted", upper=upper, lower=lower), field="between")
    if upper - lower >= 2:
        return Reorder(lower + (upper - lower) // 2, None, None)
    new_upper, new_lower = upper + 1, lower - 1
    return Reorder(new_lower + (new_upper - new_lower) // 2, new_upper, new_lower)


def rank_key(
    *, is_priority: bool, precedence: int, created_at: datetime, session_id: int
) -> tuple[int, int, datetime, int]:
    """Total order of the ranked queue: priority above spot, higher precedence first, oldest
    first, and the id last so no two rows ever compare equal."""
    return (0 if is_priority else 1, -precedence, created_at, session_id)
