"""Burn rates: dollars per minute per runtime + model from the turn history (cost / duration),
with the fallbacks, the ten-minute projection, and the history query on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import Session as DBSession
from sqlmodel import select

from integrations.quota.history import load_burn_table, recent_turn_costs
from scheduler.rules.burn import (
    PROJECTION_MINUTES,
    BurnTable,
    RateSource,
    TurnCost,
    burn_table,
    fallback_rates,
)
from scheduler.store.models import Session, Turn

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("rule", "history", "runtime", "model", "rate", "source"),
    [
        (
            "a rate is total cost over total minutes",
            [TurnCost("claude_code", "opus", 3.0, 60), TurnCost("claude_code", "opus", 1.0, 180)],
            "claude_code", "opus", 1.0, RateSource.HISTORY,
        ),
        (
            "not a mean of per-turn rates: a short pricey turn does not outweigh a long one",
            [TurnCost("claude_code", "opus", 1.0, 6), TurnCost("claude_code", "opus", 9.0, 594)],
            "claude_code", "opus", 1.0, RateSource.HISTORY,
        ),
        (
            "each model has its own rate",
            [TurnCost("claude_code", "opus", 6.0, 60), TurnCost("claude_code", "haiku", 0.5, 60)],
            "claude_code", "haiku", 0.5, RateSource.HISTORY,
        ),
        (
            "an unseen model falls back to its runtime across all models",
            [TurnCost("claude_code", "opus", 6.0, 60), TurnCost("claude_code", "haiku", 0.0, 60)],
            "claude_code", "sonnet", 3.0, RateSource.RUNTIME,
        ),
        (
            "no model asked: the runtime across all models",
            [TurnCost("claude_code", "opus", 6.0, 120), TurnCost("claude_code", None, 2.0, 120)],
            "claude_code", None, 2.0, RateSource.RUNTIME,
        ),
        (
            "no history: the runtime's configured fallback",
            [],
            "echo", None, 1.5, RateSource.FALLBACK,
        ),
        (
            "history beats the fallback",
            [TurnCost("echo", None, 0.2, 60)],
            "echo", None, 0.2, RateSource.RUNTIME,
        ),
        (
            "nothing known about a runtime: 0.0, reported as none",
            [TurnCost("claude_code", None, 1.0, 60)],
            "codex", None, 0.0, RateSource.NONE,
        ),
        (
            "a turn with no duration carries no rate",
            [TurnCost("claude_code", None, 5.0, 0)],
            "claude_code", None, 0.0, RateSource.NONE,
        ),
    ],
)
def test_burn_rate(rule, history, runtime, model, rate, source) -> None:
    table = burn_table(history, fallbacks={"echo": 1.5})
    found = table.lookup(runtime, model)
    assert (found.usd_per_minute, found.source) == (pytest.approx(rate), source), rule
    assert table.rate(runtime, model) == pytest.approx(rate), rule


@pytest.mark.parametrize(
    ("rule", "rate", "minutes", "dollars"),
    [
        ("the projection is ten minutes by default", 0.5, None, 5.0),
        ("any horizon", 0.5, 4, 2.0),
        ("no burn projects nothing", 0.0, None, 0.0),
    ],
)
def test_project(rule, rate, minutes, dollars) -> None:
    got = BurnTable.project(rate) if minutes is None else BurnTable.project(rate, minutes)
    assert got == pytest.approx(dollars), rule
    assert PROJECTION_MINUTES == 10.0


def test_project_refuses_a_negative_horizon() -> None:
    with pytest.raises(ValueError, match=r"minutes must be >= 0 \(got -1\)"):
        BurnTable.project(1.0, -1)


@pytest.mark.parametrize(
    ("rule", "cost", "seconds", "expected"),
    [
        ("echo burns its cost per its duration", 0.05, 2.0, {"echo": pytest.approx(1.5)}),
        ("an echo agent that takes no time has no rate", 0.05, 0.0, {}),
    ],
)
def test_fallback_rates(rule, cost, seconds, expected) -> None:
    assert fallback_rates(echo_cost_usd=cost, echo_seconds=seconds) == expected, rule


def test_rows_list_models_then_unmodelled_runtimes_then_fallbacks() -> None:
    table = burn_table(
        [TurnCost("claude_code", "opus", 6.0, 60), TurnCost("command", None, 1.0, 60)],
        fallbacks={"echo": 1.5, "command": 9.0},
    )
    assert [(r.runtime, r.model, r.source) for r in table.rows()] == [
        ("claude_code", "opus", RateSource.HISTORY),
        ("command", None, RateSource.RUNTIME),
        ("echo", None, RateSource.FALLBACK),
    ]


# --- the history query, on SQLite and PostgreSQL -------------------------------------------------


def add_turns(
    db: DBSession, runtime: str, costs_seconds: list[tuple[float, float | None]], *, start: datetime = T0
) -> None:
    session = Session(title="s", runtime=runtime, created_at=start)
    db.add(session)
    db.flush()
    for i, (cost, seconds) in enumerate(costs_seconds):
        finished = start + timedelta(minutes=i + 1)
        db.add(
            Turn(
                session_id=session.id,
                runtime=runtime,
                status="done",
                cost_usd=cost,
                duration_ms=None if seconds is None else int(seconds * 1000),
                created_at=start,
                started_at=finished - timedelta(seconds=seconds or 0),
                finished_at=finished,
            )
        )
    db.flush()


def test_history_sums_the_most_recent_turns_per_runtime(any_db: DBSession) -> None:
    # Three cheap old turns, then two dear recent ones: only the recent two count at per_key=2.
    add_turns(any_db, "claude_code", [(0.1, 60), (0.1, 60), (0.1, 60), (4.0, 60), (2.0, 60)])
    add_turns(any_db, "echo", [(0.05, 2), (0.05, None), (0.05, 0)])
    costs = {c.runtime: c for c in recent_turn_costs(any_db, per_key=2)}
    assert costs["claude_code"].cost_usd == pytest.approx(6.0)
    assert costs["claude_code"].seconds == pytest.approx(120)
    assert costs["claude_code"].turns == 2
    assert (costs["echo"].turns, costs["echo"].seconds) == (1, pytest.approx(2.0)), "no duration, no rate"
    table = load_burn_table(any_db, {"codex": 0.7})
    assert table.rate("claude_code") == pytest.approx((0.3 + 6.0) / 5)
    assert table.rate("echo") == pytest.approx(1.5)
    assert table.rate("codex") == pytest.approx(0.7)


def test_history_ignores_turns_still_running(any_db: DBSession) -> None:
    add_turns(any_db, "claude_code", [(1.0, 60)])
    session_id = any_db.exec(select(Session.id)).first()
    any_db.add(
        Turn(
            session_id=session_id,
            runtime="claude_code",
            status="running",
            cost_usd=50.0,
            duration_ms=1000,
            created_at=T0,
            started_at=T0,
        )
    )
    any_db.flush()
    assert load_burn_table(any_db).rate("claude_code") == pytest.approx(1.0)


def test_history_refuses_an_empty_sample(any_db: DBSession) -> None:
    with pytest.raises(ValueError, match=r"per_key must be >= 1 \(got 0\)"):
        recent_turn_costs(any_db, per_key=0)
