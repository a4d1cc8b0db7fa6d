"""The expected arrivals over a span, its hours of week read without walking it: the same dollars,
to the last bit, as the walk hour by hour it replaced — the demand-aware pace's decisions, and
`pacer simulate`'s reports, stay what they were."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from scheduler.rules.demand import HOURS_OF_WEEK, expected_arrivals, hour_of_week

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)  # a Monday
HOUR = timedelta(hours=1)


def walked(profile: tuple[float, ...], start: datetime, end: datetime) -> float:
    """The walk the rule replaced, kept here as the reference."""
    hours = [0.0] * HOURS_OF_WEEK
    at = start
    while at < end:
        step = min(at.replace(minute=0, second=0, microsecond=0) + HOUR, end)
        hours[hour_of_week(at)] += (step - at) / HOUR
        at = step
    return sum(h * usd for h, usd in zip(hours, profile, strict=True))


def test_the_same_figures_as_the_walk_to_the_last_bit() -> None:
    rng = random.Random(32)
    spans = [(NOW, NOW), (NOW, NOW + timedelta(minutes=7)), (NOW, NOW + timedelta(hours=3)),
             (NOW + timedelta(minutes=59, seconds=59), NOW + timedelta(hours=1, seconds=1)),
             (NOW + timedelta(minutes=20), NOW + timedelta(weeks=1, minutes=40)),
             (NOW + timedelta(minutes=20), NOW + timedelta(weeks=4, minutes=10)),
             (NOW, NOW + timedelta(weeks=2))]
    for _ in range(2000):
        start = NOW + timedelta(seconds=rng.uniform(0, 3 * 7 * 86400))
        spans.append((start, start + timedelta(seconds=rng.choice([rng.uniform(0, 7200), rng.uniform(0, 9 * 86400)]))))
    profile = tuple(rng.uniform(0, 40) for _ in range(HOURS_OF_WEEK))
    for start, end in spans:
        assert expected_arrivals(profile, start, end) == walked(profile, start, end), (start, end)


def test_an_empty_or_backward_span_expects_nothing() -> None:
    profile = tuple(1.0 for _ in range(HOURS_OF_WEEK))
    assert expected_arrivals(profile, NOW, NOW - timedelta(hours=2)) == 0.0
    assert expected_arrivals(profile, NOW, NOW + timedelta(weeks=2)) == 2 * HOURS_OF_WEEK
