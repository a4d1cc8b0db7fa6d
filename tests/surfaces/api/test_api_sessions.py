"""/api/v1/sessions over real HTTP: creation with genesis, class and placement; the submission's
outcome and, when held, why and until when; the ranked list; the waiting reason; class and rank
changes (a promotion of a waiting session starts it); start now; archive; follow-up messages."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from scheduler.store.db import session_scope
from scheduler.store.models import HumanMessage, Turn
from tests.support.harness import new

pytestmark = pytest.mark.api(max_sessions=2, turn_minutes=30)


def create(api, **body):
    body.setdefault("prompt", "do the work")
    r = api.post("/sessions", body)
    assert r.status_code == 201, r.text
    return r.json()


def test_an_api_session_is_api_genesis_spot_and_starts_when_there_is_room(api) -> None:
    out = create(api, prompt="refactor the parser\nwith care")
    s, sub = out["session"], out["submission"]
    assert s["genesis"] == "api" and s["scheduling_class"] == "spot" and s["class_source"] == "genesis"
    assert s["title"] == "refactor the parser" and s["prompt"] == "refactor the parser\nwith care"
    assert sub["outcome"] == "started" and sub["turn_id"] is not None and sub["why"] is None
    assert s["status"] == "running" and [r.prompt for r in api.workers.submitted] == ["refactor the parser\nwith care"]


def test_a_held_submission_says_why_and_until_when(api) -> None:
    api.quota.spend_out()
    out = create(api, prompt="sweep the backlog")
    sub, s = out["submission"], out["session"]
    assert sub["outcome"] == "held" and sub["reason"] == "at_utilization_limit"
    assert "no non-reserved budget" in sub["why"] and "5-hour" in sub["why"]
    assert "rolls over" in sub["until"] and sub["retry_at"] is not None
    assert s["status"] == "waiting" and s["hold"]["reason"] == "at_utilization_limit"
    assert s["waiting"]["headline"]["kind"] == "hold" and s["waiting"]["headline"]["owner"]
    priority = create(api, prompt="a human waits", scheduling_class="priority")
    assert priority["submission"]["outcome"] == "started" and priority["session"]["class_source"] == "session"


def test_a_child_inherits_its_parents_genesis_and_lands_just_above_it(api) -> None:
    parent = new(api.ctx, genesis="slack", precedence=40)
    child = create(api, parent_session_id=parent)["session"]
    assert child["genesis"] == "slack" and child["parent_session_id"] == parent
    assert child["precedence"] == 41 and child["scheduling_class"] == "priority"
    declared = create(api, parent_session_id=parent, genesis="api")["session"]
    assert declared["genesis"] == "api" and declared["scheduling_class"] == "spot"
    fork = create(api, forked_from=parent)["session"]
    assert fork["genesis"] == "slack" and fork["forked_from"] == parent


def test_top_of_spot_lands_above_every_queued_spot_session(api) -> None:
    api.quota.spend_out()
    ranks = [create(api, precedence=p)["session"]["precedence"] for p in (10, 300, 50)]
    assert ranks == [10, 300, 50]
    top = create(api, place="top_of_spot")["session"]
    assert top["precedence"] == 305


def test_the_list_filters_and_ranks_like_the_queue(api) -> None:
    api.quota.spend_out()
    low = create(api, precedence=1)["session"]["id"]
    high = create(api, precedence=90)["session"]["id"]
    pri = create(api, scheduling_class="priority")["session"]["id"]
    slack = new(api.ctx, genesis="slack")
    ranked = api.get("/sessions?order=precedence&status=waiting,running").json()
    assert ranked["order"] == "precedence"
    # Priority above (oldest first at equal rank), then spot by precedence.
    assert [s["id"] for s in ranked["sessions"]] == [pri, slack, high, low]
    assert [s["id"] for s in api.get("/sessions?order=precedence&class=spot").json()["sessions"]] == [high, low]
    spot = api.get("/sessions?class=spot").json()
    assert {s["id"] for s in spot["sessions"]} == {low, high}
    by_genesis = api.get("/sessions?genesis=slack").json()
    assert [s["id"] for s in by_genesis["sessions"]] == [slack]
    newest_first = [s["id"] for s in api.get("/sessions?limit=2").json()["sessions"]]
    assert newest_first == [slack, pri]
    running = api.get("/sessions?status=running").json()
    assert [s["id"] for s in running["sessions"]] == [pri]


def test_promoting_a_held_session_starts_it_through_start_now(api) -> None:
    api.quota.spend_out()
    sid = create(api)["session"]["id"]
    r = api.patch(f"/sessions/{sid}", {"scheduling_class": "priority"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["changed"]["scheduling_class"] == ["spot", "priority"]
    assert out["start_now"]["shape"] == "held" and out["start_now"]["submission"]["outcome"] == "started"
    assert out["session"]["status"] == "running" and out["session"]["hold"] is None
    assert len(api.workers.submitted) == 1  # its held turn, not a second one


def test_demoting_with_place_top_of_spot_and_setting_precedence(api) -> None:
    api.quota.spend_out()
    create(api, precedence=100)
    pri = create(api, scheduling_class="priority")["session"]["id"]
    out = api.patch(f"/sessions/{pri}", {"scheduling_class": "spot", "place": "top_of_spot"}).json()
    assert out["changed"]["scheduling_class"] == ["priority", "spot"]
    assert out["changed"]["precedence"] == [0, 105] and out["start_now"] is None
    again = api.patch(f"/sessions/{pri}", {"place": "top_of_spot"}).json()
    assert again["changed"] == {}  # already first: a no-op
    moved = api.patch(f"/sessions/{pri}", {"precedence": 7}).json()
    assert moved["changed"] == {"precedence": [105, 7]}
    default = api.patch(f"/sessions/{pri}", {"scheduling_class": "default"}).json()
    assert default["session"]["class_source"] == "genesis" and default["session"]["scheduling_class"] == "spot"


def test_patch_refusals_say_what_is_wrong(api) -> None:
    sid = create(api)["session"]["id"]
    both = api.patch(f"/sessions/{sid}", {"precedence": 5, "place": "top_of_spot"})
    assert both.status_code == 422 and both.json()["field"] == "place"
    empty = api.patch(f"/sessions/{sid}", {})
    assert empty.status_code == 422 and "at least one of" in empty.json()["message"]
    assert api.post(f"/sessions/{sid}/archive").status_code == 200
    finished = api.patch(f"/sessions/{sid}", {"precedence": 5})
    assert (
        finished.status_code == 409
        and finished.json()["error"] == "conflict"
        and "archived" in finished.json()["message"]
    )


def test_start_now_asks_the_gate_again_and_says_so(api) -> None:
    api.quota.spend_out()
    sid = create(api)["session"]["id"]
    r = api.post(f"/sessions/{sid}/start_now")
    assert r.status_code == 200
    assert r.json()["shape"] == "held" and r.json()["submission"]["outcome"] == "held"
    assert "still spot" in r.json()["sentence"]
    api.quota.spent_5h = 0
    r = api.post(f"/sessions/{sid}/start_now").json()
    assert r["submission"]["outcome"] == "started"


def test_archive_ends_a_running_session_and_a_second_archive_is_409(api) -> None:
    sid = create(api)["session"]["id"]
    r = api.post(f"/sessions/{sid}/archive")
    assert (
        r.status_code == 200
        and r.json()["previous_status"] == "running"
        and r.json()["session"]["status"] == "archived"
    )
    again = api.post(f"/sessions/{sid}/archive")
    assert again.status_code == 409 and "already archived" in again.json()["message"]


def test_a_follow_up_waits_behind_the_running_turn_and_is_delivered_after_it(api) -> None:
    sid = create(api)["session"]["id"]
    r = api.post(f"/sessions/{sid}/messages", {"text": "also update the docs"})
    assert r.status_code == 200
    out = r.json()
    assert out["human_message"] is False and out["submission"]["outcome"] == "queued"
    assert "waits in its queue" in out["submission"]["why"] and out["session"]["queued_messages"] == 1
    api.deferrer.advance(timedelta(minutes=31))
    assert [t.prompt for t in api.workers.submitted][-1] == "also update the docs"


def test_a_rostered_human_message_is_recorded_as_one(api) -> None:
    pytest.importorskip("scheduler.steering.promotion", reason="the human-message promotion (P4) is not in this tree")
    api.quota.spend_out()
    sid = create(api, precedence=3)["session"]["id"]
    r = api.post(f"/sessions/{sid}/messages", {"text": "please look at this first"}, actor="alice")
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["human_message"] is True and out["message_id"] is not None
    with session_scope(api.ctx.engine) as db:
        rows = list(db.exec(select(HumanMessage).where(HumanMessage.session_id == sid)))
    assert [(m.actor, m.surface, m.text) for m in rows] == [("alice", "api", "please look at this first")]
    assert api.post(f"/sessions/{sid}/messages", {"text": ""}).status_code == 422


def test_a_message_to_a_running_turn_says_whether_its_agent_read_it_or_it_waits(api) -> None:
    """Talk to a running agent (issue #31, item 3): the answer says "agent" while the running
    turn's agent listens (its runner marks the turn so: `integrations.turn_inbox`), "after_turn"
    once it does not; `/pacer reply` says the same in words."""
    sid = create(api)["session"]["id"]
    with session_scope(api.ctx.engine) as db:
        (turn,) = db.exec(select(Turn).where(Turn.session_id == sid, Turn.status == "running"))
        turn.listening = True
        db.add(turn)
    heard = api.post(f"/sessions/{sid}/messages", {"text": "use the v2 endpoint"}, actor="alice").json()
    assert heard["human_message"] is True and heard["delivery"] == "agent"
    said = api.post("/chat", {"text": f"reply {sid} and keep the old one"}, actor="alice").json()["text"]
    assert f"Your message is on #{sid}: delivered to the running agent" in said
    with session_scope(api.ctx.engine) as db:
        (turn,) = db.exec(select(Turn).where(Turn.session_id == sid, Turn.status == "running"))
        turn.listening = False  # it has answered: later messages wait for the next turn
        db.add(turn)
    waits = api.post(f"/sessions/{sid}/messages", {"text": "one more thing"}, actor="alice").json()
    assert waits["delivery"] == "after_turn"
    said = api.post("/chat", {"text": f"reply {sid} and the docs"}, actor="alice").json()["text"]
    assert f"Your message is on #{sid}: queued for the next turn" in said
    idle = create(api, precedence=3)["session"]["id"]
    api.deferrer.advance(timedelta(minutes=31))  # both turns have ended
    assert api.post(f"/sessions/{idle}/messages", {"text": "hello"}, actor="alice").json()["delivery"] is None
