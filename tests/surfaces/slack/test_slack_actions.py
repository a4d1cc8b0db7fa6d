"""The App Home and its buttons through the real app: what Pacer published, ran and said, and where."""

from __future__ import annotations

from typing import Any

import pytest

from bot.slack.actions import (
    HOLD_RELEASE,
    QUEUE_RESUME,
    QUEUE_ROW,
    SESSION_PRIORITY,
    command_for,
)
from integrations.slack.messages import GATE_CARD_BLOCKS
from scheduler.errors import InvalidInput
from scheduler.store.models import Session
from scheduler.store.sessions import NewSession, create_session
from tests.support.harness import SetQuota
from tests.support.slack_mock import TEAM_ID, MockSlack


def _queue(slack: Any, count: int, *, requester: str = "UMEM") -> list[int]:
    ids = []
    with slack.pacer.db() as db:
        for n in range(count):
            row = create_session(
                db, NewSession(title=f"task {n}", genesis="api", requester=requester), now=slack.pacer.clock.now()
            )
            ids.append(int(row.id))
    return ids


def _class_of(slack: Any, sid: int) -> str | None:
    with slack.pacer.db() as db:
        return db.get(Session, sid).scheduling_class


def _home_click(user: str, action: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "team": {"id": TEAM_ID},
        "user": {"id": user, "team_id": TEAM_ID},
        "api_app_id": "A0PACER",
        "trigger_id": "1.2.3",
        "container": {"type": "view", "view_id": "V0HOME"},
        "view": {"id": "V0HOME", "type": "home", "blocks": []},
        "actions": [action],
    }


def _message_click(user: str, action: dict[str, Any], response_url: str) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "team": {"id": TEAM_ID},
        "user": {"id": user, "team_id": TEAM_ID},
        "api_app_id": "A0PACER",
        "trigger_id": "1.2.3",
        "container": {"type": "message", "message_ts": "1790000000.000100", "channel_id": "C0WORK"},
        "channel": {"id": "C0WORK"},
        "response_url": response_url,
        "actions": [action],
    }


def _overflow(value: str) -> dict[str, Any]:
    return {"type": "overflow", "action_id": QUEUE_ROW, "block_id": "row",
            "selected_option": {"value": value, "text": {"type": "plain_text", "text": "x"}}, "action_ts": "1.1"}


def _button(action_id: str, value: str) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": action_id,
        "block_id": "b",
        "value": value,
        "text": {"type": "plain_text", "text": "x"},
        "action_ts": "1.1",
    }


def test_app_home_opened_publishes_the_gate_card_above_the_ranked_queue(slack, mock: MockSlack) -> None:
    ids = _queue(slack, 3)
    event = {"type": "app_home_opened", "user": "UMEM", "channel": "D0DM", "tab": "home"}
    assert slack.event(event, event_id="EvHOME1").status_code == 200
    (call,) = mock.wait_for_method("views.publish")
    assert call.body["user_id"] == "UMEM"
    view = call.body["view"]
    assert view["type"] == "home"
    blocks = view["blocks"]
    assert [b["type"] for b in blocks[:GATE_CARD_BLOCKS]] == [
        "header",
        "section",
        "section",
        "section",
        "context",
        "divider",
    ]
    assert blocks[0]["text"]["text"] == "Spot gate on · a spot session would start now"
    assert blocks[1]["text"]["text"].startswith("*Decision for a new spot session:* *starts now* (no quota reading)")
    assert "No quota reading: the gate falls open" in blocks[2]["text"]["text"]
    assert (
        blocks[3]["text"]["text"]
        == "*When the pool comes back:* Nothing here says when work resumes: no account has a reading."
    )
    assert blocks[4]["elements"][0]["text"].startswith("Slots: 0.0 of 10 in use (0 priority, 0 spot running)")
    # the burn-rate table under the card (P22 item 9), as `/pacer burn` says it
    assert blocks[GATE_CARD_BLOCKS]["type"] == "context"
    assert blocks[GATE_CARD_BLOCKS]["elements"][0]["text"].startswith("*Burn rates*: dollars a minute")
    assert "echo: $" in blocks[GATE_CARD_BLOCKS]["elements"][0]["text"]
    queue = blocks[GATE_CARD_BLOCKS + 1]
    assert queue["type"] == "header" and "3 waiting" in queue["text"]["text"]
    menus = [b["accessory"] for b in blocks if b.get("accessory", {}).get("action_id") == QUEUE_ROW]
    assert len(menus) == len(ids)


def test_the_home_card_says_which_ceiling_holds_and_when_the_pool_comes_back(slack, mock: MockSlack) -> None:
    quota = SetQuota(clock=slack.pacer.clock)
    quota.spend_out()
    slack.pacer.ctx.ports.quota = quota
    slack.event({"type": "app_home_opened", "user": "UMEM", "channel": "D0DM", "tab": "home"}, event_id="EvHOME3")
    (call,) = mock.wait_for_method("views.publish")
    card = [b["text"]["text"] for b in call.body["view"]["blocks"][1:4]]
    assert card[0].startswith(
        "*Decision for a new spot session:* *held* by the spot budget"
    )
    assert "Held until the 5-hour window rolls over at 2026-11-02 13:00 UTC" in card[0]
    assert "$1,000.00 spent of $1,000.00 · $200.00 reserved for priority" in card[1]
    assert "Fleet burn $0.00/min against a sustainable $1.11/min" in card[1]  # the weekly window's curve
    assert (
        card[2]
        == "*When the pool comes back:* Work resumes in 4h 00m (2026-11-02 13:00 UTC): 1 account is out of capacity."
    )


def test_someone_off_the_roster_sees_the_refusal_and_no_card(slack, mock: MockSlack) -> None:
    slack.event({"type": "app_home_opened", "user": "UNOBODY", "channel": "D0DM", "tab": "home"}, event_id="EvHOME4")
    (call,) = mock.wait_for_method("views.publish")
    blocks = call.body["view"]["blocks"]
    assert len(blocks) == 1 and "Spot gate" not in blocks[0]["text"]["text"]


def test_the_app_home_stays_within_a_hundred_blocks(slack, mock: MockSlack) -> None:
    _queue(slack, 130)
    slack.event({"type": "app_home_opened", "user": "UOPS", "channel": "D0DM", "tab": "home"}, event_id="EvHOME2")
    (call,) = mock.wait_for_method("views.publish")
    blocks = call.body["view"]["blocks"]
    assert len(blocks) == 100
    assert blocks[0]["type"] == "header" and blocks[0]["text"]["text"].startswith("Spot gate")
    assert "more not shown" in blocks[-1]["elements"][0]["text"]


def test_promote_from_the_home_menu_runs_promote_as_that_user_and_answers_by_dm(slack, mock: MockSlack) -> None:
    first, second = _queue(slack, 2)
    assert slack.action(_home_click("UOPS", _overflow(f"promote:{second}"))).status_code == 200
    slack.settle()
    assert _class_of(slack, second) == "priority"
    assert _class_of(slack, first) is None
    (dm,) = mock.calls_to("chat.postMessage")
    assert dm.body["channel"] == "UOPS"
    assert f"*#{second}* task 1 is now *priority*" in dm.body["text"]
    (home,) = mock.calls_to("views.publish")  # republished after the change
    assert home.body["user_id"] == "UOPS"


def test_a_menu_click_on_a_message_answers_ephemerally_at_its_response_url(slack, mock: MockSlack) -> None:
    (sid,) = _queue(slack, 1)
    slack.action(_message_click("UOPS", _overflow(f"archive:{sid}"), mock.response_url("click")))
    slack.settle()
    (answer,) = mock.calls_to("/response/click")
    assert answer.body["response_type"] == "ephemeral"
    assert answer.body["replace_original"] is False
    assert f"#{sid}" in answer.body["text"]
    with slack.pacer.db() as db:
        assert db.get(Session, sid).status == "archived"
    assert mock.calls_to("views.publish") == []


def test_make_this_session_priority_in_a_thread_promotes_it(slack, mock: MockSlack) -> None:
    (sid,) = _queue(slack, 1)
    slack.action(_message_click("UOPS", _button(SESSION_PRIORITY, str(sid)), mock.response_url("held")))
    slack.settle()
    assert _class_of(slack, sid) == "priority"
    assert "is now *priority*" in mock.calls_to("/response/held")[0].body["text"]


def test_a_click_from_someone_off_the_roster_changes_nothing(slack, mock: MockSlack) -> None:
    (sid,) = _queue(slack, 1)
    slack.action(_home_click("UNOBODY", _overflow(f"promote:{sid}")))
    slack.settle()
    assert _class_of(slack, sid) is None
    (dm,) = mock.calls_to("chat.postMessage")
    assert dm.body["channel"] == "UNOBODY"
    assert "needs the operator role" in dm.body["text"]


def test_a_button_naming_no_pacer_action_is_refused_in_words(slack, mock: MockSlack) -> None:
    (sid,) = _queue(slack, 1)
    slack.action(_message_click("UOPS", _overflow(f"delete_everything:{sid}"), mock.response_url("odd")))
    slack.settle()
    (answer,) = mock.calls_to("/response/odd")
    assert "does not name a Pacer action" in answer.body["text"]
    assert "delete_everything" in answer.body["text"]
    assert _class_of(slack, sid) is None


@pytest.mark.parametrize(
    ("action", "command"),
    [
        (_overflow("promote:42"), "promote 42"),
        (_overflow("start:42"), "start 42"),
        (_overflow("demote_top:42"), "demote 42 top"),
        (_overflow("archive:7"), "archive 7"),
        (_button(HOLD_RELEASE, "3"), "release 3"),
        (_button(QUEUE_RESUME, "resume"), "resume"),
        (_button(SESSION_PRIORITY, "42"), "promote 42"),
    ],
)
def test_each_action_runs_the_command_it_names(action: dict[str, Any], command: str) -> None:
    assert command_for(action) == command


@pytest.mark.parametrize(
    ("action", "problem"),
    [
        (_overflow("promote"), "session id ''"),
        (_overflow("promote:abc"), "session id 'abc'"),
        (_overflow("promote:0"), "session id '0'"),
        (_overflow("promote:42; archive 1"), "session id '42; archive 1'"),
        (_overflow("explode:42"), "the verb must be one of archive, demote_top, promote, start"),
        (_button(HOLD_RELEASE, "-1"), "hold id '-1'"),
        (_button("pacer.unknown", "1"), "action_id 'pacer.unknown'"),
    ],
)
def test_an_action_with_a_bad_value_names_the_problem(action: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidInput, match=problem.replace("(", r"\(").replace(")", r"\)")):
        command_for(action)
