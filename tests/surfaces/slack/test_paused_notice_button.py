"""A paused notice carries "Make this session priority" (seed 001, "What a pause does": the pause
banner carries the hold banner's button; P22 item 9), through the real app: a signed `/pacer pause
<id> queue` parks a session born in a Slack thread, the notice lands in that thread with the button,
and a signed click on it makes the session priority and brings it back."""

from __future__ import annotations

from typing import Any

from integrations.slack.notifier import SESSION_PRIORITY, thread_source
from scheduler.engine.turns import submit_turn
from scheduler.store.sessions import NewSession, create_session
from tests.support.harness import row
from tests.support.slack_mock import TEAM_ID, MockSlack

THREAD = "1790000000.000100"


def _slack_session(slack: Any) -> int:
    message = {"channel": "C0WORK", "ts": THREAD, "user": "UOPS", "channel_type": "channel"}
    with slack.pacer.db() as db:
        s = create_session(db, NewSession(title="Fix the flaky test", genesis="slack", requester="UOPS",
                                          source={"slack": thread_source(message)}), now=slack.pacer.clock.now())
        s.prompt = "fix it"
        db.add(s)
        db.flush()
        return int(s.id or 0)


def _paused(calls: list[Any]) -> list[Any]:
    return [c for c in calls if c.path.endswith("chat.postMessage")
            and c.body.get("thread_ts") == THREAD and ":pause_button:" in c.body.get("text", "")]


def test_a_parked_sessions_paused_notice_carries_make_this_session_priority(slack: Any, mock: MockSlack) -> None:
    ctx = slack.pacer.ctx
    sid = _slack_session(slack)
    submit_turn(ctx, sid, "fix it", kind="first")
    assert slack.command(f"pause {sid} queue halt", user="UOPS").status_code == 200
    mock.wait_for_method("/response/cmd", timeout=10)
    slack.settle()
    (notice,) = mock.wait_for(_paused, timeout=10)
    assert "Parked in the spot queue on purpose" in notice.body["text"], notice.body["text"]
    (button,) = notice.body["blocks"][-1]["elements"]
    assert (button["action_id"], button["value"], button["text"]["text"]) == (
        SESSION_PRIORITY, str(sid), "Make this session priority")
    assert (row(ctx, sid).scheduling_class, row(ctx, sid).pause_reason) == ("spot", "user_spot_queue")

    click = {
        "type": "block_actions", "team": {"id": TEAM_ID}, "user": {"id": "UOPS", "team_id": TEAM_ID},
        "api_app_id": "A0PACER", "trigger_id": "1.2.3",
        "container": {"type": "message", "message_ts": THREAD, "channel_id": "C0WORK"},
        "channel": {"id": "C0WORK"}, "response_url": mock.response_url("click"),
        "actions": [{**button, "block_id": "b", "action_ts": "1.1"}],
    }
    assert slack.action(click).status_code == 200
    mock.wait_for_method("/response/click", timeout=10)
    slack.settle()
    back = row(ctx, sid)
    assert (back.scheduling_class, back.pause_reason, back.status) == ("priority", None, "running")


def test_a_priority_sessions_paused_notice_has_no_button(slack: Any, mock: MockSlack) -> None:
    sid = _slack_session(slack)
    slack.pacer.ctx.emit("paused", session_id=sid, reason="budget_ceiling", sentence="Paused.")
    slack.settle()
    (notice,) = mock.wait_for(_paused, timeout=10)
    assert all(block["type"] != "actions" for block in notice.body["blocks"]), notice.body["blocks"]
