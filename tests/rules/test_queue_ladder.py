"""Seed 000's QUEUE ladder, the pure half (`scheduler/rules/queue_ladder.py`): the order, the
bounded view of one selected waiter, and the cN / pN / wN badges."""

from __future__ import annotations

import pytest

from scheduler.rules.queue_ladder import (
    BUDGET,
    CAPACITY,
    ELIGIBLE,
    HOLD,
    PREREQUISITE,
    Gap,
    Rung,
    Step,
    around,
    badges,
    order,
    severity,
)


@pytest.mark.parametrize(
    ("reason", "group"),
    [
        (None, ELIGIBLE),
        ("overtaken_by_class", ELIGIBLE),
        ("fleet_at_cap", CAPACITY),
        ("capacity", CAPACITY),
        ("concurrency_group", CAPACITY),
        ("preempted_by_priority", CAPACITY),
        ("at_utilization_limit", BUDGET),
        ("cost_cap", BUDGET),
        ("prerequisite", PREREQUISITE),
        ("wake_me_up_later", PREREQUISITE),
        ("operator_hold", HOLD),
        ("auth_outage", HOLD),
        ("something new", HOLD),
    ],
)
def test_each_reason_has_its_group_and_an_unknown_one_is_a_hold(reason, group) -> None:
    assert severity(reason) == group


def test_eligible_first_then_parked_by_severity_with_the_order_kept_inside_each_group() -> None:
    admitted = [Rung(1, HOLD), Rung(2, CAPACITY), Rung(3), Rung(4, BUDGET), Rung(5, CAPACITY), Rung(6)]
    assert [r.id for r in order(admitted)] == [3, 6, 2, 5, 4, 1]
    assert [r.parked for r in order(admitted)] == [False, False, True, True, True, True]
    assert order([]) == []


def shown(steps) -> list:
    return [s.count if isinstance(s, Gap) else (s.place, s.selected) for s in steps]


def test_a_short_ladder_shows_every_entry() -> None:
    assert shown(around("abcdefg", 6)) == [(1, False), (2, False), (3, False), (4, False), (5, False), (6, False),
                                            (7, True)]
    assert shown(around("a", 0)) == [(1, True)]


def test_a_long_ladder_shows_the_front_two_on_either_side_and_gap_counts() -> None:
    ladder = list(range(20))
    assert shown(around(ladder, 9)) == [(1, False), 6, (8, False), (9, False), (10, True), (11, False), (12, False), 8]
    assert shown(around(ladder, 0)) == [(1, True), (2, False), (3, False), 17]
    assert shown(around(ladder, 19)) == [(1, False), 16, (18, False), (19, False), (20, True)]
    assert shown(around(ladder, 2)) == [(1, False), (2, False), (3, True), (4, False), (5, False), 15]
    for index in range(20):
        steps = around(ladder, index)
        assert sum(isinstance(s, Step) for s in steps) <= 7
        assert sum(s.count if isinstance(s, Gap) else 1 for s in steps) == 20  # every entry shown or counted


def test_a_selection_off_the_ladder_is_refused() -> None:
    with pytest.raises(ValueError, match="index 3 is not on a ladder of 3"):
        around("abc", 3)


def test_badges_show_only_what_differs_from_the_default() -> None:
    assert badges(capacity=None, multiplier=None, precedence=0, weight=1.0) == ()
    assert badges(capacity=9, multiplier=None, precedence=20, weight=1.0) == ("c9", "p20")
    assert badges(capacity=None, multiplier=1.5, precedence=-3, weight=0.0) == ("c1.5x", "p-3", "w0")
    assert badges(capacity=None, multiplier=None, precedence=0, weight=0.5) == ("w0.5",)
