"""/api/v1/policy and /api/v1/holds over real HTTP: the gate card for a spot session now, a
policy change through change_policy with one audit line naming the API, and every hold."""

from __future__ import annotations

import pytest
from sqlmodel import select

from scheduler.store.db import session_scope
from scheduler.store.models import PolicyAudit

pytestmark = pytest.mark.api(max_sessions=1, turn_minutes=30)


def audits(api) -> list[PolicyAudit]:
    with session_scope(api.ctx.engine) as db:
        return list(db.exec(select(PolicyAudit).where(PolicyAudit.surface == "api")))


def test_the_gate_card_says_whether_a_spot_session_would_start_and_what_holds_it(api) -> None:
    open_ = api.get("/policy").json()
    assert open_["policy"]["max_sessions"] == 1
    assert open_["gate"]["decision"]["allowed"] is True and open_["gate"]["decision"]["reason"] == "within_limits"
    names = {w["name"] for w in open_["gate"]["windows"]}
    assert names == {"5h", "7d"} and all(w["sustainable_rate_per_min"] is not None for w in open_["gate"]["windows"])
    api.quota.spend_out()
    spent = api.get("/policy").json()["gate"]["decision"]
    assert spent["allowed"] is False and spent["ceiling"] == "spot_budget" and spent["budget_spent_windows"] == ["5h"]
    assert "no non-reserved budget" in spent["why"] and "rolls over" in spent["until"]
    assert api.get("/policy").json()["audit"][0].startswith("[FleetPolicy] changed via test")


def test_a_policy_change_is_audited_once_naming_the_api_and_the_actor(api) -> None:
    r = api.patch("/policy", {"max_sessions": 4, "reserve_5h_pct": 30}, actor="alice")
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["policy"]["max_sessions"] == 4 and out["policy"]["reserve_5h_pct"] == 30
    assert out["audit"] == "[FleetPolicy] changed via api by alice: reserve_5h_pct 20 -> 30, max_sessions 1 -> 4"
    same = api.patch("/policy", {"max_sessions": 4}).json()
    assert same["audit"] is None
    lines = [a.line for a in audits(api)]
    assert lines == [out["audit"]]


def test_genesis_overrides_merge_and_null_removes_one(api) -> None:
    api.patch("/policy", {"genesis_class_overrides": {"api": "priority"}})
    api.patch("/policy", {"genesis_class_overrides": {"command": "spot"}})
    assert api.get("/policy").json()["policy"]["genesis_class_overrides"] == {"api": "priority", "command": "spot"}
    api.patch("/policy", {"genesis_class_overrides": {"api": None}})
    assert api.get("/policy").json()["policy"]["genesis_class_overrides"] == {"command": "spot"}
    created = api.post("/sessions", {"prompt": "x"}).json()["session"]
    assert created["scheduling_class"] == "spot"


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"reserve_5h_pct": 150}, "reserve_5h_pct", "less than or equal to 100"),
        ({"max_sessions": 0}, "max_sessions", "greater than or equal to 1"),
        ({"gating_enabled": "maybe"}, "gating_enabled", "valid boolean"),
        ({"genesis_class_overrides": {"slack": "spot"}}, "genesis", "take their class from their trigger"),
        ({"genesis_class_overrides": {"api": "urgent"}}, "genesis_class_overrides.api", "'priority' or 'spot'"),
        ({"colour": "red"}, "colour", "not a field"),
        ({}, "body", "at least one of"),
    ],
)
def test_a_bad_policy_value_is_422_and_changes_nothing(api, body, field, says) -> None:
    r = api.patch("/policy", {"max_sessions": 3, **body} if body and field != "colour" else body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and says in r.json()["message"], r.json()
    assert api.get("/policy").json()["policy"]["max_sessions"] == 1 and audits(api) == []


def test_raising_the_limit_frees_held_work_at_once(api) -> None:
    first = api.post("/sessions", {"prompt": "one"}).json()
    second = api.post("/sessions", {"prompt": "two"}).json()
    assert first["submission"]["outcome"] == "started" and second["submission"]["outcome"] == "held"
    assert second["submission"]["reason"] == "fleet_at_cap" and "slot" in second["submission"]["why"]
    api.patch("/policy", {"max_sessions": 2})
    api.settle()
    assert api.get(f"/sessions/{second['session']['id']}").json()["status"] == "running"


def test_holds_lists_each_held_session_with_its_headline_first(api) -> None:
    api.quota.spend_out()
    sid = api.post("/sessions", {"prompt": "wait for it"}).json()["session"]["id"]
    out = api.get("/holds").json()
    assert out["source"] in ("holds_view", "records")
    assert [s["id"] for s in out["sessions"]] == [sid]
    headline = out["sessions"][0]["records"][0]
    assert headline["kind"] == "hold" and headline["reason"] == "at_utilization_limit" and headline["retry_at"]
    assert out["queue_holds"] == [] and out["operator_holds"] == []
