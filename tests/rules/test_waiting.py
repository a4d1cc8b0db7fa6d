"""Why is this waiting: one ranking (seed 001, "Three parks, one headline")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.rules.waiting import Mechanism, rank, waiting_reason

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
M = timedelta(minutes=1)


def hold(at, retry=None):
    return Mechanism("hold", "at_utilization_limit", at, "held", retry or NOW + 10 * M)


def pause(at):
    return Mechanism("pause", "spot_quota", at)


def park(at):
    return Mechanism("park", "auth_outage", at)


@pytest.mark.parametrize(
    ("rule", "mechanisms", "headline_kind", "loser_kinds"),
    [
        ("nothing recorded: no headline", [], None, []),
        (
            "newest wins: a park fifteen seconds after a pause reads as the park",
            [pause(NOW - 15 * M / 60), park(NOW)],
            "park",
            ["pause"],
        ),
        ("newest wins the other way round too", [park(NOW - 5 * M), pause(NOW)], "pause", ["park"]),
        (
            "no stamp ranks below any stamp",
            [Mechanism("pause", "spot_quota", None), hold(NOW - 60 * M)],
            "hold",
            ["pause"],
        ),
        (
            "an overdue hold cannot headline beside another mechanism",
            [hold(NOW - 1 * M, retry=NOW - 30 * M), pause(NOW - 120 * M)],
            "pause",
            ["hold"],
        ),
        (
            "an overdue hold that is the only mechanism keeps the headline",
            [hold(NOW - 60 * M, retry=NOW - 30 * M)],
            "hold",
            [],
        ),
    ],
)
def test_ranking(rule, mechanisms, headline_kind, loser_kinds) -> None:
    result = rank(mechanisms, NOW)
    assert (result.headline.kind if result.headline else None) == headline_kind, rule
    assert [loser.mechanism.kind for loser in result.others] == loser_kinds, rule
    assert all(loser.why for loser in result.others)


@dataclass
class Row:
    hold_reason: str | None = None
    hold_at: datetime | None = None
    hold_sentence: str | None = None
    hold_retry_at: datetime | None = None
    pause_reason: str | None = None
    pause_at: datetime | None = None
    pause_detail: str | None = None
    park_reason: str | None = None
    park_at: datetime | None = None
    wake_at: datetime | None = None


def test_a_wake_not_yet_reached_outranks_everything() -> None:
    result = waiting_reason(
        Row(hold_reason="fleet_at_cap", hold_at=NOW, hold_retry_at=NOW + 10 * M, wake_at=NOW + 60 * M), NOW
    )
    assert result.headline.kind == "sleep" and result.others[0].mechanism.kind == "hold"


def test_a_wake_in_the_past_is_an_ordinary_candidate_again() -> None:
    result = waiting_reason(
        Row(hold_reason="fleet_at_cap", hold_at=NOW, hold_retry_at=NOW + 10 * M, wake_at=NOW - M), NOW
    )
    assert result.headline.kind == "hold"
