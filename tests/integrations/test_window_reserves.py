"""Each window its own reserve (issue 30, P18 item 3): a per-model weekly bucket the provider
counts apart ("7d_opus", shown as "weekly Opus") keeps its kind's default, the weekly reserve,
until the policy gives it one of its own (`reserve:7d_opus=<pct>` on `/pacer policy set` and the
console, `window_reserves` on PATCH /api/v1/policy), audited; `default` gives it back. A name that
is not a per-model bucket or a value that is not a percentage is refused naming the key, and
changes nothing.

A real database, the real agents source (an Opus runner: its weekly bucket applies) and the wired
API, the provider's reading written to the book as the command runner writes it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import select

from bot.chat import answers
from integrations.quota.agents import AgentsSource
from integrations.quota.ledger import LedgerSource
from scheduler.engine.turns import submit_turn
from scheduler.ports import ProviderReading
from scheduler.quota_reuse import ReusedQuotaSource
from scheduler.store.db import session_scope
from scheduler.store.models import PolicyAudit
from scheduler.store.policy import load_policy
from tests.support.api_client import Api, make_api
from tests.support.harness import new

H = timedelta(hours=1)


@pytest.fixture
def api(any_engine: Engine, clock: Any) -> Iterator[Api]:
    api = make_api(any_engine, clock, max_sessions=4)
    ledger = LedgerSource(any_engine, capacity_5h_usd=50, capacity_7d_usd=500, anchor=datetime(2026, 1, 5, tzinfo=UTC))
    source = AgentsSource(any_engine, ledger, model="claude-opus-4-1")
    api.ctx.ports.quota = ReusedQuotaSource(source)  # as `pacer serve` wires it
    # Half the Opus week used, 30 hours before its reset: inside its pace, and inside the 80% a
    # 20% weekly reserve leaves to spot work.
    source.book.record(ProviderReading(
        "anthropic", "seven_day_opus", clock.now(), account="a", status="allowed", utilization=0.5,
        resets_at=clock.now() + 30 * H,
    ))
    yield api
    api.close()


def reserves(api: Api) -> dict[str, float]:
    with session_scope(api.ctx.engine) as db:
        return dict(load_policy(db).window_reserves)


def audit_lines(api: Api) -> list[str]:
    with session_scope(api.ctx.engine) as db:
        rows = db.exec(select(PolicyAudit).where(PolicyAudit.surface != "test").order_by(PolicyAudit.id))  # type: ignore[arg-type]
        return [a.line for a in rows]


def test_a_bucket_keeps_the_weekly_reserve_until_it_has_its_own(api: Api) -> None:
    assert submit_turn(api.ctx, new(api.ctx, prompt="before"), "before").outcome == "started"
    reply = answers.answer(api.pacer, "alice", "policy set reserve:7d_opus=60", surface="slack")
    assert reply.ok, reply.text
    assert reserves(api) == {"7d_opus": 60.0}
    assert audit_lines(api)[-1] == (
        "[FleetPolicy] changed via slack:/pacer by alice: window_reserves {} -> {'7d_opus': 60.0}"
    )
    api.ctx.clock.advance(timedelta(seconds=5))
    held = submit_turn(api.ctx, new(api.ctx, prompt="after"), "after")
    assert (held.outcome, held.reason) == ("held", "at_utilization_limit")
    assert "weekly Opus: 50.0% of the window used against a spot share of 40.0%" in (held.sentence or ""), held.sentence
    shown = answers.answer(api.pacer, "alice", "policy", surface="console").text
    assert "60% of the weekly Opus bucket (reserve:7d_opus)" in shown, shown
    priority = submit_turn(api.ctx, new(api.ctx, genesis="command", prompt="now"), "now")
    assert priority.outcome == "started"


def test_default_gives_the_bucket_back_to_the_weekly_reserve(api: Api) -> None:
    r = api.patch("/policy", {"window_reserves": {"7d_opus": 60, "7d_sonnet": 10}}, actor="alice")
    assert r.status_code == 200, r.text
    assert r.json()["policy"]["window_reserves"] == {"7d_opus": 60.0, "7d_sonnet": 10.0}
    reply = answers.answer(api.pacer, "alice", "policy set reserve:7d_opus=default", surface="console")
    assert reply.ok, reply.text
    assert reserves(api) == {"7d_sonnet": 10.0}
    assert api.patch("/policy", {"window_reserves": {"7d_sonnet": None}}).json()["policy"]["window_reserves"] == {}
    assert len(audit_lines(api)) == 3
    assert submit_turn(api.ctx, new(api.ctx, prompt="runs"), "runs").outcome == "started"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("policy set reserve:5h=10", "reserve:5h: '5h' is not a window with a reserve of its own"),
        ("policy set reserve:opus=10", "name a per-model weekly bucket such as 7d_opus"),
        ("policy set reserve:7d_opus=150", "reserve:7d_opus: '150' must be a percentage between 0 and 100"),
        ("policy set reserve:7d_opus=lots", "reserve:7d_opus: 'lots' must be a percentage between 0 and 100"),
        ("policy set reserve:7d_opus=10 reserve:7d_opus=20", "reserve:7d_opus: given twice"),
        ("policy set max_sessions=5 reserve:7d_opus=-1", "must be a percentage between 0 and 100"),
    ],
)
def test_a_bad_reserve_names_the_key_and_changes_nothing(api: Api, line: str, message: str) -> None:
    reply = answers.answer(api.pacer, "alice", line, surface="slack")
    assert not reply.ok and message in reply.text, reply.text
    assert reserves(api) == {} and audit_lines(api) == []


@pytest.mark.parametrize(
    "body",
    [
        {"window_reserves": {"7d": 30}, "max_sessions": 5},
        {"window_reserves": {"7d_opus": 101}, "max_sessions": 5},
        {"window_reserves": {"7d_opus": "half"}, "max_sessions": 5},
        {"window_reserves": ["7d_opus"], "max_sessions": 5},
    ],
)
def test_the_api_refuses_a_bad_reserve_with_its_field(api: Api, body: dict[str, Any]) -> None:
    r = api.patch("/policy", body)
    assert r.status_code == 422 and "window_reserves" in r.text, r.text
    assert reserves(api) == {} and audit_lines(api) == []
    assert api.get("/policy").json()["policy"]["max_sessions"] == 4
