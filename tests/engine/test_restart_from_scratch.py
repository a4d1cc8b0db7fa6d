"""Restart from scratch (seed 001, "Consecutive holds back off" and "A pause outranks
precedence"): one implementation behind `/pacer restart`, the console and
`POST /api/v1/sessions/{id}/restart`; it resets the ladder, never bypasses the gate, and its
doors refuse a sleeping session before anything changes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from bot.chat import answers
from scheduler.engine.restart import RESTART_FROM_SCRATCH_KEYS
from scheduler.engine.turns import submit_turn
from scheduler.pauses.sleep import wake_me_up_later
from scheduler.store.db import session_scope
from scheduler.store.models import EnqueuedMessage, Session, Turn
from tests.support.harness import new, row

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.api(max_sessions=2, turn_minutes=30),
]


def console(api, text: str, actor: str = "alice"):
    return answers.answer(api.pacer, actor, text, surface="console")


def turns_of(api, sid: int) -> list[Turn]:
    with session_scope(api.ctx.engine) as db:
        return list(db.exec(select(Turn).where(Turn.session_id == sid).order_by(Turn.id)))


def test_restart_resets_the_ladder_but_the_gate_still_holds_a_spot_session(api) -> None:
    """Seed 001: without the reset a restart reads as one more consecutive hold and climbs a rung;
    with it the session is held again at ten minutes, and the answer says how to start it."""
    ctx = api.ctx
    api.quota.spend_out()
    sid = new(ctx, genesis="api", title="nightly sweep", prompt="sweep the docs")
    assert submit_turn(ctx, sid, "sweep the docs").reason == "at_utilization_limit"
    api.deferrer.advance(timedelta(minutes=75))  # re-checks at 10, 20 and 40 minutes: three more rungs
    climbed = row(ctx, sid).hold_count
    assert climbed >= 3

    r = api.post(f"/sessions/{sid}/restart")
    assert r.status_code == 200, r.text
    body = r.json()
    held = row(ctx, sid)
    assert body["submission"]["outcome"] == "held" and held.hold_count == 1
    assert held.hold_retry_at is not None and held.hold_retry_at - ctx.clock.now() <= timedelta(minutes=11)
    assert "back at the first rung" in body["sentence"] and "Make it priority" in body["sentence"]
    assert held.hold_turn_kind == "restart" and held.hold_prompt == "sweep the docs"


def test_restart_runs_the_first_prompt_as_a_new_agent_session_with_a_fresh_failure_count(api) -> None:
    ctx = api.ctx
    sid = new(ctx, genesis="command", requester="bob", prompt="write the parser")
    assert submit_turn(ctx, sid, "write the parser").outcome == "started"
    api.deferrer.advance(timedelta(minutes=31))
    with session_scope(ctx.engine) as db:  # as a flaky agent would leave it
        s = db.get(Session, sid)
        s.status, s.consecutive_failures, s.agent_session_id = "failed", 4, "agent-abc"
        db.add(s)

    said = console(api, f"restart {sid}", actor="bob")
    assert said.ok and "restarted from scratch" in said.text, said.text
    after = row(ctx, sid)
    assert after.status == "running" and after.consecutive_failures == 0 and after.agent_session_id is None
    last = turns_of(api, sid)[-1]
    assert (last.kind, last.prompt, last.status) == ("restart", "write the parser", "running")
    assert set(RESTART_FROM_SCRATCH_KEYS) >= {"hold_count", "consecutive_failures", "agent_session_id"}


def test_a_held_message_someone_wrote_is_kept_in_the_queue_not_dropped(api) -> None:
    ctx = api.ctx
    sid = new(ctx, genesis="api", prompt="first prompt")
    assert submit_turn(ctx, sid, "first prompt").outcome == "started"
    api.deferrer.advance(timedelta(minutes=31))
    api.quota.spend_out()
    assert submit_turn(ctx, sid, "also fix the flaky test", kind="follow_up").outcome == "held"

    r = api.post(f"/sessions/{sid}/restart")
    assert r.status_code == 200 and r.json()["kept"] == 1, r.text
    with session_scope(ctx.engine) as db:
        queued = list(db.exec(select(EnqueuedMessage).where(EnqueuedMessage.session_id == sid)))
    assert [(m.prompt, m.kind, m.delivered_at) for m in queued] == [("also fix the flaky test", "follow_up", None)]
    assert row(ctx, sid).hold_prompt == "first prompt"  # the restart's own turn is what the gate holds


@pytest.mark.parametrize("door", ["api", "console"])
def test_every_door_refuses_a_session_asleep_on_its_wake_and_changes_nothing(api, door) -> None:
    """Seed 001's table: the restart doors refuse a sleeping session with one sentence naming the
    pause, rather than consuming it on the way past."""
    ctx = api.ctx
    sid = new(ctx, genesis="command", requester="alice", prompt="later")
    wake_me_up_later(ctx, sid, ctx.clock.now() + timedelta(hours=2))
    before = row(ctx, sid)
    if door == "api":
        r = api.post(f"/sessions/{sid}/restart")
        assert r.status_code == 409, r.text
        said = r.text
    else:
        reply = console(api, f"restart {sid}")
        assert not reply.ok
        said = reply.text
    assert "is asleep until" in said and "take the next candidate" in said
    after = row(ctx, sid)
    assert (after.wake_at, after.status, after.hold_count) == (before.wake_at, before.status, before.hold_count)
    assert turns_of(api, sid) == []


def test_restart_refuses_a_running_or_archived_session_and_an_unknown_id(api) -> None:
    ctx = api.ctx
    sid = new(ctx, genesis="api", prompt="long job")
    assert submit_turn(ctx, sid, "long job").outcome == "started"
    r = api.post(f"/sessions/{sid}/restart")
    assert r.status_code == 409 and "is running a turn" in r.text, r.text
    assert len(turns_of(api, sid)) == 1

    assert api.post("/sessions/999/restart").status_code == 404
    bad = console(api, "restart soon")
    assert not bad.ok and "id: 'soon' is not an id" in bad.text, bad.text

    api.deferrer.advance(timedelta(minutes=31))
    assert console(api, f"archive {sid}").ok
    r = api.post(f"/sessions/{sid}/restart")
    assert r.status_code == 409 and "is archived" in r.text, r.text


def test_a_member_may_restart_only_their_own_session(api) -> None:
    ctx = api.ctx
    sid = new(ctx, genesis="command", requester="carol", prompt="carol's work")
    refused = console(api, f"restart {sid}", actor="bob")
    assert not refused.ok and turns_of(api, sid) == []
    assert console(api, f"restart {sid}", actor="carol").ok
    assert turns_of(api, sid)[-1].kind == "restart"
