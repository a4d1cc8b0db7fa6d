"""Precedence: seed 001's "Precedence", "Placing something at the head of the queue", "The
Ranked view", as a table plus hypothesis properties."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.errors import InvalidInput
from scheduler.rules.precedence import (
    SLOT_GAP,
    above_top_spot,
    between,
    rank_key,
    resolve_placement,
    spawn_precedence,
)


@pytest.mark.parametrize(
    ("rule", "others", "current", "expected"),
    [
        ("top_of_spot is SLOT_GAP above the live maximum", [0, 10, 3], None, 10 + SLOT_GAP),
        ("an empty queue places at SLOT_GAP", [], None, SLOT_GAP),
        ("the instance form floors at the session's own rank", [10], 1000, 1000),
        ("the instance form lifts a lower session above the top", [10], 3, 15),
        ("the instance form excludes itself (caller leaves it out)", [12], 17, 17),
        ("negative queues still place above their top", [-50, -20], None, -15),
    ],
)
def test_above_top_spot(rule, others, current, expected) -> None:
    assert above_top_spot(others, current=current) == expected, rule


@pytest.mark.parametrize(
    ("rule", "upper", "lower", "value", "nudged_upper", "nudged_lower"),
    [
        ("the midpoint when one exists", 30, 20, 25, None, None),
        ("a gap of two has one middle", 22, 20, 21, None, None),
        ("adjacent neighbours are nudged one apart each: 21 and 20 become 22 and 19", 21, 20, 20, 22, 19),
        ("equal neighbours are nudged too", 20, 20, 20, 21, 19),
        ("no row above: SLOT_GAP above the row below", None, 20, 25, None, None),
        ("no row below: SLOT_GAP below the row above", 20, None, 15, None, None),
        ("no neighbours: the default", None, None, 0, None, None),
    ],
)
def test_between(rule, upper, lower, value, nudged_upper, nudged_lower) -> None:
    result = between(upper, lower)
    assert (result.value, result.upper_neighbour, result.lower_neighbour) == (value, nudged_upper, nudged_lower), rule


def test_between_refuses_inverted_neighbours() -> None:
    with pytest.raises(InvalidInput, match=r"the row above \(3\) must rank at or above the row below \(9\)"):
        between(3, 9)


@pytest.mark.parametrize(
    ("rule", "parent", "bookkeeping", "expected"),
    [
        ("a spawn lands one above its parent", 40, False, 41),
        ("a bookkeeping fork takes the default", 40, True, 0),
        ("no parent: the default", None, False, 0),
    ],
)
def test_spawn_precedence(rule, parent, bookkeeping, expected) -> None:
    assert spawn_precedence(parent, bookkeeping=bookkeeping) == expected, rule


def test_place_and_precedence_together_is_an_error() -> None:
    with pytest.raises(InvalidInput, match="either precedence or place, not both"):
        resolve_placement(precedence=4, place="top_of_spot")
    with pytest.raises(InvalidInput, match="the only one is top_of_spot"):
        resolve_placement(precedence=None, place="bottom")
    assert resolve_placement(precedence=None, place=None) is None


ints = st.integers(min_value=-10**6, max_value=10**6)


@given(ints, ints)
def test_reorder_lands_strictly_between_or_nudges_exactly_those_two(a: int, b: int) -> None:
    upper, lower = max(a, b), min(a, b)
    r = between(upper, lower)
    if r.upper_neighbour is None:
        assert lower < r.value < upper
        assert r.lower_neighbour is None
    else:
        assert (r.upper_neighbour, r.lower_neighbour) == (upper + 1, lower - 1)
        assert r.lower_neighbour < r.value < r.upper_neighbour


@given(st.lists(ints, max_size=20), ints)
def test_top_of_spot_twice_changes_nothing_the_second_time(others: list[int], current: int) -> None:
    first = above_top_spot(others, current=current)
    assert above_top_spot(others, current=first) == first
    assert all(first > o for o in others)


@given(
    st.lists(st.tuples(st.booleans(), ints, st.integers(0, 10**6)), min_size=2, max_size=30, unique_by=lambda t: t[2])
)
def test_ranking_is_a_total_order(rows: list[tuple[bool, int, int]]) -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    keys = [
        rank_key(is_priority=p, precedence=v, created_at=base + timedelta(seconds=i % 7), session_id=i)
        for p, v, i in rows
    ]
    assert len(set(keys)) == len(keys)
    ordered = sorted(keys)
    for x, y in zip(ordered, ordered[1:]):
        assert x < y
        if x[0] == y[0]:
            assert x[1] <= y[1]  # higher precedence first within a class
