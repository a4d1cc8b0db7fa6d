"""A temporary max sessions (seed 000, "Agent queued for a runner slot": "apply/clear a temporary
value … Setting another temporary value replaces the first; expiry or Clear resumes configured
behavior"; "Lowering the effective cap below current occupied capacity is safe and
non-preemptive")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from bot.chat import answers
from scheduler.engine.turns import submit_turn
from scheduler.store.db import session_scope
from scheduler.store.models import Policy, PolicyAudit, Turn
from tests.support.harness import new, row

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.api(max_sessions=2, turn_minutes=300),
]


def console(api, text: str, actor: str = "alice"):
    return answers.answer(api.pacer, actor, text, surface="console")


def policy_row(api) -> Policy:
    with session_scope(api.ctx.engine) as db:
        found = db.get(Policy, 1)
        assert found is not None
        return found


def running(api) -> int:
    with session_scope(api.ctx.engine) as db:
        return len(list(db.exec(select(Turn).where(Turn.status == "running"))))


def test_a_temporary_max_binds_until_its_expiry_then_the_configured_one_again(api) -> None:
    ctx = api.ctx
    ids = [new(ctx, genesis="api", prompt=f"job {i}") for i in range(4)]
    for sid in ids:
        submit_turn(ctx, sid, row(ctx, sid).prompt)
    assert running(api) == 2 and row(ctx, ids[3]).hold_reason == "fleet_at_cap"

    said = console(api, "policy max-override 4 for 2h")
    assert said.ok, said.text
    api.deferrer.advance(timedelta(seconds=1))  # the queue pass it asked for
    assert running(api) == 4
    assert (policy_row(api).max_sessions, policy_row(api).max_sessions_override) == (2, 4)
    shown = console(api, "policy").text
    assert "max_sessions: 2 · temporarily 4 until" in shown and "(then 2 again)" in shown, shown

    api.deferrer.advance(timedelta(hours=2))
    after = policy_row(api)
    assert (after.max_sessions_override, after.max_sessions_override_until) == (None, None)
    assert running(api) == 4  # non-preemptive: nothing running is stopped
    with session_scope(ctx.engine) as db:
        lines = [a.line for a in db.exec(select(PolicyAudit).order_by(PolicyAudit.id))]
    assert any("changed via console by alice: max_sessions_override None -> 4" in line for line in lines), lines
    assert any("changed via expiry: max_sessions_override 4 -> None" in line for line in lines), lines
    late = new(ctx, genesis="api", prompt="late")
    assert submit_turn(ctx, late, "late").reason == "fleet_at_cap"


def test_another_temporary_value_replaces_the_first_and_clear_ends_it(api) -> None:
    assert console(api, "policy max-override 4 for 1h").ok
    assert console(api, "policy max-override 8 for 3h").ok
    api.deferrer.advance(timedelta(hours=1, minutes=5))
    assert policy_row(api).max_sessions_override == 8  # the first one's expiry does not end the second
    assert console(api, "policy max-override clear").ok
    assert policy_row(api).max_sessions_override is None


def test_the_api_sets_and_clears_it_and_shows_it(api) -> None:
    until = (api.ctx.clock.now() + timedelta(hours=3)).isoformat()
    r = api.call("PATCH", "/policy", json={"max_sessions_override": 6, "max_sessions_override_until": until})
    assert r.status_code == 200, r.text
    got = api.get("/policy").json()
    assert got["policy"]["max_sessions_override"] == 6 and got["gate"]["policy"]["max_sessions_override"] == 6
    r = api.call("PATCH", "/policy", json={"max_sessions_override": None})
    assert r.status_code == 200 and policy_row(api).max_sessions_override is None, r.text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("policy max-override 0 for 2h", "max-override: '0' must be between 1 and 10,000"),
        ("policy max-override 5", "missing for <duration>"),
        ("policy max-override 5 until 2h", "unexpected argument 'until'"),
        ("policy max-override 5 for 8d", "at most 7 days away"),
        ("policy max-override 5 for soon", "for: 'soon' is not a duration"),
    ],
)
def test_a_bad_temporary_value_is_refused_and_changes_nothing(api, text, says) -> None:
    said = console(api, text)
    assert not said.ok and says in said.text, said.text
    assert policy_row(api).max_sessions_override is None


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"max_sessions_override": 5}, 422),  # the document requires the expiry
        ({"max_sessions_override": 5, "max_sessions_override_until": "2026-11-02T10:00:00"}, 422),  # no offset
        ({"max_sessions_override": 5, "max_sessions_override_until": "2020-01-01T00:00:00+00:00"}, 409),  # past
    ],
)
def test_the_api_refuses_a_temporary_value_without_a_future_expiry(api, body, status) -> None:
    r = api.call("PATCH", "/policy", json=body)
    assert r.status_code == status and r.json()["field"] == "max_sessions_override_until", r.text
    assert policy_row(api).max_sessions_override is None


def test_only_an_operator_sets_it(api) -> None:
    said = console(api, "policy max-override 5 for 1h", actor="bob")
    assert not said.ok and policy_row(api).max_sessions_override is None
