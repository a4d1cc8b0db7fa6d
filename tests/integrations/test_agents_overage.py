"""Overage and shared accounts, as the provider reports them (issue 30, P18 items 4 and 6).

While an account spends overage (`isUsingOverage`: extra usage, money beyond the plan) on a window,
spot work waits for that window's reset unless the policy counts overage as spend
(`overage_spot`, off by default); priority work runs either way. The switch moves on every policy
surface with one audit line, a bad value is refused naming the key, and every window shows where
its figures come from: overage in use, and accounts that report one shared bucket counted once.

A real database, the real agents source and the wired API; the provider's readings are written
to the book as the command runner writes them (its stream parsing is tested in
tests/integrations/test_agents_quota.py)."""

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
from scheduler.store.models import PolicyAudit, Turn
from scheduler.store.policy import load_policy
from tests.support.api_client import Api, make_api
from tests.support.harness import new

H = timedelta(hours=1)


def said(at: datetime, *, account: str = "a", **kw: Any) -> ProviderReading:
    return ProviderReading("anthropic", "five_hour", at, account=account, **kw)


@pytest.fixture
def api(any_engine: Engine, clock: Any) -> Iterator[Api]:
    api = make_api(any_engine, clock, max_sessions=4)
    ledger = LedgerSource(any_engine, capacity_5h_usd=50, capacity_7d_usd=500, anchor=datetime(2026, 1, 5, tzinfo=UTC))
    api.ctx.ports.quota = ReusedQuotaSource(AgentsSource(any_engine, ledger))  # as `pacer serve` wires it
    yield api
    api.close()


def record(api: Api, **kw: Any) -> None:
    source = api.ctx.ports.quota
    assert isinstance(source, ReusedQuotaSource) and isinstance(source.source, AgentsSource)
    source.source.book.record(said(api.ctx.clock.now(), **kw))


def switch(api: Api) -> bool:
    with session_scope(api.ctx.engine) as db:
        return load_policy(db).overage_spot


def audit_lines(api: Api) -> list[str]:
    with session_scope(api.ctx.engine) as db:
        rows = db.exec(select(PolicyAudit).where(PolicyAudit.surface != "test").order_by(PolicyAudit.id))  # type: ignore[arg-type]
        return [a.line for a in rows]


def test_overage_holds_spot_work_until_the_reset_and_priority_runs(api: Api) -> None:
    resets = api.ctx.clock.now() + 2 * H
    record(api, status="allowed", utilization=0.3, resets_at=resets, is_using_overage=True)
    spot = submit_turn(api.ctx, new(api.ctx, prompt="sweep"), "sweep")
    assert (spot.outcome, spot.reason) == ("held", "at_utilization_limit")
    sentence = spot.sentence or ""
    assert "spending extra usage (overage, money beyond the plan) on the 5-hour window" in sentence, sentence
    assert "overage_spot is off" in sentence and "extra usage (overage) in use" in sentence
    assert "Held until the 5-hour window rolls over at" in sentence, sentence  # the reset, not a budget freeing up
    priority = submit_turn(api.ctx, new(api.ctx, genesis="command", prompt="now"), "now")
    assert priority.outcome == "started"


def test_an_allowed_event_without_a_figure_still_says_overage(api: Api) -> None:
    """Claude Code's `allowed` events often carry no utilization: the ledger stands in for the
    figure, and the provider's word on overage still holds spot work."""
    record(api, status="allowed", resets_at=api.ctx.clock.now() + H, is_using_overage=True)
    card = api.get("/policy").json()["gate"]
    five = next(w for w in card["windows"] if w["name"] == "5h")
    assert (five["fallback"], five["using_overage"], five["overage_refused"]) == ("no_utilization", True, True)
    assert card["admission"]["allowed"] is False


def test_with_overage_counted_as_spend_spot_work_runs_on_it(api: Api) -> None:
    record(api, status="allowed", utilization=0.3, resets_at=api.ctx.clock.now() + H, is_using_overage=True)
    r = api.patch("/policy", {"overage_spot_enabled": True}, actor="alice")
    assert r.status_code == 200, r.text
    assert r.json()["audit"] == "[FleetPolicy] changed via api by alice: overage_spot_enabled off -> on"
    spot = submit_turn(api.ctx, new(api.ctx, prompt="sweep"), "sweep")
    assert spot.outcome == "started", spot.sentence
    five = next(w for w in api.get("/policy").json()["gate"]["windows"] if w["name"] == "5h")
    assert (five["using_overage"], five["overage_refused"]) == (True, False)


def test_a_reset_ends_the_overage(api: Api) -> None:
    resets = api.ctx.clock.now() + H
    record(api, status="allowed", utilization=0.3, resets_at=resets, is_using_overage=True)
    held = submit_turn(api.ctx, new(api.ctx, prompt="sweep"), "sweep")
    assert held.outcome == "held"
    api.deferrer.run_until(resets + timedelta(minutes=30))  # its re-checks, on the virtual clock
    with session_scope(api.ctx.engine) as db:
        turns = db.exec(select(Turn).where(Turn.session_id == held.session_id)).all()
        started = [t.started_at for t in turns if t.started_at]
    assert started and min(started) >= resets  # held while the overage lasted, started once the window reset


def test_each_surface_moves_the_switch_with_one_audit_line(api: Api) -> None:
    assert api.get("/policy").json()["policy"]["overage_spot_enabled"] is False and not switch(api)
    reply = answers.answer(api.pacer, "alice", "policy", surface="console")
    assert "overage_spot: off (spot work waits for the reset while an account spends overage" in reply.text, reply.text
    for surface, shown_as, value in (("slack", "slack:/pacer", "on"), ("console", "console", "off")):
        reply = answers.answer(api.pacer, "alice", f"policy set overage_spot={value}", surface=surface)
        assert reply.ok, reply.text
        assert switch(api) is (value == "on")
        before = "off" if value == "on" else "on"
        line = f"[FleetPolicy] changed via {shown_as} by alice: overage_spot_enabled {before} -> {value}"
        assert audit_lines(api)[-1] == line
    assert len(audit_lines(api)) == 2


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("policy set overage_spot=maybe", "overage_spot: 'maybe' must be on or off"),
        ("policy set max_sessions=5 overage_spot=2", "overage_spot: '2' must be on or off"),
    ],
)
def test_a_bad_value_names_the_key_and_changes_nothing(api: Api, line: str, message: str) -> None:
    reply = answers.answer(api.pacer, "alice", line, surface="slack")
    assert not reply.ok and message in reply.text, reply.text
    r = api.patch("/policy", {"overage_spot_enabled": "sometimes", "max_sessions": 5})
    assert r.status_code == 422 and "overage_spot_enabled" in r.text
    assert not switch(api) and audit_lines(api) == []
    assert api.get("/policy").json()["policy"]["max_sessions"] == 4


def test_accounts_sharing_one_bucket_are_shown_counted_once(api: Api) -> None:
    resets = api.ctx.clock.now() + 3 * H
    for account in ("a", "b", "c"):  # one billing organisation: the same figure and reset for all three
        record(api, account=account, status="allowed", utilization=0.4, resets_at=resets)
    card = api.get("/policy").json()["gate"]
    five = next(w for w in card["windows"] if w["name"] == "5h")
    assert (five["accounts"], five["buckets"], five["spent"]) == (3, 1, 0.4)
    reply = answers.answer(api.pacer, "alice", "policy", surface="console")
    shown = "as Anthropic (Claude Code) reports it, "
    shown += "read from 3 accounts that share 1 bucket (a shared bucket counts once)"
    assert shown in reply.text, reply.text


def test_a_pace_hold_names_the_provider_whose_figure_it_read(api: Api) -> None:
    resets = api.ctx.clock.now() + 4.5 * H  # half an hour into the five hours
    record(api, status="allowed", utilization=0.0, resets_at=resets)
    assert submit_turn(api.ctx, new(api.ctx, prompt="first"), "first").outcome == "started"  # spot work in flight
    api.ctx.clock.advance(timedelta(seconds=5))
    record(api, status="allowed", utilization=0.5, resets_at=resets)  # far ahead of the straight line
    paced = submit_turn(api.ctx, new(api.ctx, prompt="second"), "second")
    sentence = paced.sentence or ""
    assert paced.outcome == "held" and "Held by the spot gate's pace" in sentence, sentence
    assert "5-hour: 50.0% used, ahead of the straight line" in sentence
    assert "(not calibrated yet) · as Anthropic (Claude Code) reports it" in sentence, sentence
    assert "weekly: $0.20/min with this session against a sustainable $0.04/min · the ledger's estimate" in sentence
