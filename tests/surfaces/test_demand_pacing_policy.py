"""The demand-aware pace's switch as the operator sets it (issue 32, P20 item 1): on by default,
moved by PATCH /api/v1/policy and `/pacer policy set demand_pacing=…` on Slack and the console,
each through `change_policy` with one audit line naming the surface; a bad value is refused
naming the key and changes nothing; the gate card says which mode decided the pace."""

from __future__ import annotations

import pytest
from sqlmodel import select

from bot.chat import answers
from scheduler.store.db import session_scope
from scheduler.store.models import PolicyAudit
from scheduler.store.policy import load_policy
from tests.support.api_client import make_api


@pytest.fixture
def api(any_engine, clock):
    api = make_api(any_engine, clock, max_sessions=4)
    yield api
    api.close()


def audit_lines(api) -> list[str]:
    with session_scope(api.ctx.engine) as db:
        rows = db.exec(select(PolicyAudit).where(PolicyAudit.surface != "test").order_by(PolicyAudit.id))  # type: ignore[arg-type]
        return [a.line for a in rows]


def switch(api) -> bool:
    with session_scope(api.ctx.engine) as db:
        return load_policy(db).demand_pacing


def test_it_is_on_by_default_and_the_card_says_which_mode_decides(api) -> None:
    shown = api.get("/policy").json()
    assert shown["policy"]["demand_pacing_enabled"] is True and switch(api)
    assert shown["gate"]["policy"]["demand_pacing_enabled"] is True
    assert shown["gate"]["decision"]["pace_mode"] == "curve"  # an idle fleet: no window is ahead of its curve
    reply = answers.answer(api.pacer, "alice", "policy", surface="console")
    assert reply.ok and "Pace: demand-aware; no window is ahead of its curve" in reply.text, reply.text
    assert "demand_pacing: on" in reply.text


def test_each_surface_moves_it_with_one_audit_line_naming_it(api) -> None:
    r = api.patch("/policy", {"demand_pacing_enabled": False}, actor="alice")
    assert r.status_code == 200, r.text
    assert r.json()["audit"] == "[FleetPolicy] changed via api by alice: demand_pacing_enabled on -> off"
    assert r.json()["policy"]["demand_pacing_enabled"] is False and not switch(api)
    reply = answers.answer(api.pacer, "alice", "policy", surface="console")
    assert "Pace: the curve decides (demand-aware pacing is off)." in reply.text, reply.text
    for surface, shown_as, value in (("slack", "slack:/pacer", "on"), ("console", "console", "off")):
        reply = answers.answer(api.pacer, "alice", f"policy set demand_pacing={value}", surface=surface)
        assert reply.ok, reply.text
        assert switch(api) is (value == "on")
        before = "off" if value == "on" else "on"
        line = f"[FleetPolicy] changed via {shown_as} by alice: demand_pacing_enabled {before} -> {value}"
        assert audit_lines(api)[-1] == line
    assert api.patch("/policy", {"demand_pacing_enabled": False}).json()["audit"] is None  # nothing moved: no line
    assert len(audit_lines(api)) == 3


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("policy set demand_pacing=maybe", "demand_pacing: 'maybe' must be on or off"),
        ("policy set max_sessions=5 demand_pacing=2", "demand_pacing: '2' must be on or off"),
    ],
)
def test_a_bad_value_names_the_key_and_changes_nothing(api, line, message) -> None:
    reply = answers.answer(api.pacer, "alice", line, surface="slack")
    assert not reply.ok and message in reply.text, reply.text
    assert switch(api) and audit_lines(api) == []
    r = api.patch("/policy", {"demand_pacing_enabled": "sometimes", "max_sessions": 5})
    assert r.status_code == 422 and "demand_pacing_enabled" in r.text
    assert switch(api) and audit_lines(api) == []
