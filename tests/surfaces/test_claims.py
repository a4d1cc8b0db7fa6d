"""A session's claim on the slot budget on every surface (seed 000, "Agent queued for a runner
slot"; issue P11 items 1 and 5): its weight, and its own budget as a whole number or as a
multiplier of the fleet's slots ("A 1.5x multiplier resolves to 7.5 against an effective limit
of 5 and is recalculated on each queue poll")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from bot.chat import answers
from scheduler.engine.claims import Claim
from scheduler.engine.turns import submit_turn
from scheduler.store.db import session_scope
from scheduler.store.models import Session
from tests.support.harness import new, row

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.api(max_sessions=2, turn_minutes=30),
]


def console(api, text: str, actor: str = "alice"):
    return answers.answer(api.pacer, actor, text, surface="console")


@pytest.mark.parametrize(
    ("claim", "slots", "budget"),
    [
        (Claim(1.0, None, False), 5, 5.0),  # the fleet's
        (Claim(1.0, 3, False), 5, 3.0),  # its own whole number
        (Claim(1.0, None, False, 1.5), 5, 7.5),  # seed 000's own example
        (Claim(1.0, None, False, 0.5), 2, 1.0),
    ],
)
def test_a_claim_budget_is_its_own_number_a_multiple_of_the_slots_or_the_slots(claim, slots, budget) -> None:
    assert claim.budget(slots) == budget
    assert claim.explicit is (claim.capacity is not None or claim.multiplier is not None)


def test_a_multiplier_is_recalculated_against_the_slots_on_every_pass(api) -> None:
    """0.5x of 2 slots is 1: a run-alone barrier beside one running session. Raising the slots to
    4 makes it 2, and the next pass starts it — nobody touched the session."""
    ctx = api.ctx
    running = new(ctx, genesis="command", prompt="long job")
    assert submit_turn(ctx, running, "long job").outcome == "started"
    sid = new(ctx, genesis="command", prompt="heavy job", capacity_multiplier=0.5)
    held = submit_turn(ctx, sid, "heavy job")
    assert held.outcome == "held" and held.reason == "capacity", held
    assert "its own capacity budget 1 (0.5x the fleet's 2 slots)" in held.sentence

    assert console(api, "policy set max_sessions=4").ok
    api.deferrer.advance(timedelta(seconds=1))
    assert row(ctx, sid).status == "running"


def test_weight_and_capacity_commands_change_the_claim_through_one_function(api, caplog) -> None:
    ctx = api.ctx
    sid = new(ctx, genesis="command", requester="bob", prompt="x")
    said = console(api, f"capacity {sid} 1.5x", actor="bob")
    assert said.ok and "capacity multiplier the fleet's → 1.5" in said.text, said.text
    assert (row(ctx, sid).capacity, row(ctx, sid).capacity_multiplier) == (None, 1.5)
    assert console(api, f"capacity {sid} 1", actor="bob").ok
    assert (row(ctx, sid).capacity, row(ctx, sid).capacity_multiplier) == (1, None)
    with caplog.at_level("INFO", logger="pacer.capacity"):
        assert console(api, f"weight {sid} 0", actor="bob").ok
    assert row(ctx, sid).weight == 0.0
    assert f"session #{sid} claim changed by bob: weight 1.0 -> 0.0" in caplog.text
    assert console(api, f"capacity {sid} fleet", actor="bob").ok
    assert (row(ctx, sid).capacity, row(ctx, sid).capacity_multiplier) == (None, None)
    again = console(api, f"capacity {sid} fleet", actor="bob")
    assert again.ok and "nothing changed" in again.text

    r = api.call("PATCH", f"/sessions/{sid}", json={"capacity_multiplier": 2.5, "weight": 0.5})
    assert r.status_code == 200, r.text
    assert r.json()["changed"] == {"capacity_multiplier": [None, 2.5], "weight": [0.0, 0.5]}
    assert r.json()["session"]["capacity_multiplier"] == 2.5
    r = api.call("PATCH", f"/sessions/{sid}", json={"capacity_multiplier": None})
    assert r.status_code == 200 and row(ctx, sid).capacity_multiplier is None, r.text


def test_new_takes_weight_and_capacity_options(api) -> None:
    said = console(api, "new weight:0.5 capacity:1.5x tidy the changelog")
    assert said.ok, said.text
    created = row(api.ctx, 1)
    assert (created.weight, created.capacity, created.capacity_multiplier, created.prompt) == (
        0.5,
        None,
        1.5,
        "tidy the changelog",
    )
    r = api.post("/sessions", {"prompt": "p", "capacity_multiplier": 3})
    assert r.status_code in (200, 201) and r.json()["session"]["capacity_multiplier"] == 3.0, r.text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("capacity 1 0x", "capacity: a multiplier must be a finite number above 0, at most 100"),
        ("capacity 1 101x", "capacity: a multiplier must be a finite number above 0, at most 100"),
        (
            "capacity 1 soon",
            "capacity: 'soon' is not a budget; use a whole number (1 runs it alone), a multiplier like 1.5x, or fleet",
        ),
        ("capacity 1 0", "capacity: '0' must be between 1 and 10,000"),
        ("weight 1 -1", "weight: '-1' is not a number"),
        ("weight 1 20000", "weight: must be a finite number >= 0, at most 10,000"),
        ("weight 1", "missing a weight"),
        ("new capacity:abcx do it", "capacity: 'abc' is not a number"),
    ],
)
def test_a_bad_claim_is_refused_naming_the_argument_and_changes_nothing(api, text, says) -> None:
    sid = new(api.ctx, genesis="command", requester="alice", prompt="x")
    before = row(api.ctx, sid)
    said = console(api, text)
    assert not said.ok and says in said.text, said.text
    after = row(api.ctx, sid)
    assert (after.weight, after.capacity, after.capacity_multiplier) == (
        before.weight,
        before.capacity,
        before.capacity_multiplier,
    )
    with session_scope(api.ctx.engine) as db:
        assert len(list(db.exec(select(Session)))) == 1  # `new` created nothing


@pytest.mark.parametrize(
    "body",
    [
        {"capacity": 2, "capacity_multiplier": 1.5},
        {"capacity_multiplier": 0},
        {"capacity_multiplier": "2x"},
        {"weight": -1},
    ],
)
def test_a_bad_claim_through_the_api_is_a_422_and_changes_nothing(api, body) -> None:
    sid = new(api.ctx, genesis="command", requester="alice", prompt="x")
    r = api.call("PATCH", f"/sessions/{sid}", json={**body, "precedence": 40})
    assert r.status_code == 422, r.text
    after = row(api.ctx, sid)
    assert (after.weight, after.capacity, after.capacity_multiplier, after.precedence) == (1.0, None, None, 0)


def test_a_member_may_change_only_their_own_sessions_claim(api) -> None:
    sid = new(api.ctx, genesis="command", requester="carol", prompt="x")
    assert not console(api, f"weight {sid} 2", actor="bob").ok
    assert row(api.ctx, sid).weight == 1.0
    assert console(api, f"weight {sid} 2", actor="alice").ok and row(api.ctx, sid).weight == 2.0


def test_the_queue_ladder_marks_parked_waiters_and_shows_claim_badges(api) -> None:
    """Seed 000: a waiter whose capacity condition is not satisfied is marked parked (still
    queued), the heading counts them, and a non-default claim shows as cN / wN (w0 for zero)."""
    ctx = api.ctx
    running = new(ctx, genesis="command", prompt="long job")
    assert submit_turn(ctx, running, "long job").outcome == "started"
    heavy = new(ctx, genesis="command", title="heavy", prompt="heavy", capacity_multiplier=0.5)
    assert submit_turn(ctx, heavy, "heavy").reason == "capacity"
    light = new(ctx, genesis="command", title="light", prompt="light", weight=0.0, capacity=3)

    text = console(api, "queue").text
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip().startswith("#")}
    assert text.splitlines()[0].endswith("waiting in all · 1 parked"), text
    assert "c0.5x" in lines[f"#{heavy}"] and "parked" in lines[f"#{heavy}"]
    assert "c3 w0" in lines[f"#{light}"] and "parked" not in lines[f"#{light}"]
    assert "parked" not in lines[f"#{running}"] and " c" not in lines[f"#{running}"].split("p0")[1]
