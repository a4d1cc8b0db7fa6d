"""The Slack notifier: a session's news in its own thread, queue holds in the ops channel.

Notices have the shape the scheduler emits after commit (`effects.notice("held", session_id=…, …)`);
the sessions are real rows, the Web API the loopback mock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from slack_sdk import WebClient
from sqlalchemy import Engine

from bot.config.settings import load
from bot.runtime.process import Pacer
from bot.slack.edge import SlackEdge
from integrations.slack.notifier import (
    QUEUE_RESUME,
    SESSION_PRIORITY,
    SlackNotifier,
    thread_of,
    thread_source,
)
from scheduler.store import db as dbmod
from scheduler.store.models import QueueHold, Session
from tests.support.slack_mock import BOT_TOKEN, MockSlack, make_pacer

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def pacer(engine: Engine, clock, deferrer) -> Pacer:  # type: ignore[no-untyped-def]
    return make_pacer(engine, clock, deferrer, load({}, toml_path=None))


@pytest.fixture
def notifier(pacer: Pacer, mock: MockSlack) -> SlackNotifier:
    return SlackNotifier(pacer.engine, WebClient(token=BOT_TOKEN, base_url=mock.api_url), ops_channel="C0OPS")


def _add(pacer: Pacer, **fields: Any) -> int:
    with pacer.db() as db:
        row = Session(created_at=T0, **fields)
        db.add(row)
        db.flush()
        return int(row.id or 0)


def _slack_session(pacer: Pacer) -> int:
    message = {"channel": "C0WORK", "ts": "1790000000.000100", "user": "UMEM", "channel_type": "channel"}
    return _add(pacer, title="Fix the <flaky> test", genesis="slack", source={"slack": thread_source(message)})


def test_thread_source_keeps_a_reply_in_its_parent_thread() -> None:
    top = thread_source({"channel": "C1", "ts": "10.1", "user": "U1"})
    reply = thread_source({"channel": "C1", "ts": "11.1", "thread_ts": "10.1", "user": "U1"})
    assert top["thread_ts"] == reply["thread_ts"] == "10.1"
    assert thread_of({"slack": top}) == ("C1", "10.1")
    assert thread_of({}) is None
    assert thread_of({"slack": {"channel": "C1"}}) is None


@pytest.mark.parametrize(
    ("event", "context", "expected"),
    [
        ("started", {"turn_id": 1, "kind": "first"}, "has started."),
        ("paused", {"reason": "budget_ceiling"}, "is paused (budget ceiling)."),
        ("done", {"turn_id": 1, "cost_usd": 0.05, "output": "All 12 tests pass & the flake is gone."},
         "is done.\n> All 12 tests pass &amp; the flake is gone."),
        ("failed", {"error": "exit 2 & no output", "outcome": "failed"}, "failed.\nexit 2 &amp; no output"),
        ("failed", {"error": "timeout", "retry_exhausted": True}, "is blocked after six failures in a row."),
        ("archived", {"actor": "UOPS"}, "was archived; it will not run."),
    ],
)
def test_session_news_goes_into_the_sessions_thread(pacer: Pacer, notifier: SlackNotifier, mock: MockSlack,
                                                    event: str, context: dict[str, Any], expected: str) -> None:
    sid = _slack_session(pacer)
    notifier.notify(event, {"session_id": sid, **context})
    (call,) = mock.calls_to("chat.postMessage")
    assert call.body["channel"] == "C0WORK"
    assert call.body["thread_ts"] == "1790000000.000100"
    assert call.body["text"].startswith(f"{_emoji(event)} *#{sid}* Fix the &lt;flaky&gt; test ")
    assert expected in call.body["text"]


def _emoji(event: str) -> str:
    return {
        "started": ":arrow_forward:",
        "paused": ":pause_button:",
        "done": ":white_check_mark:",
        "failed": ":x:",
        "archived": ":file_cabinet:",
    }[event]


def test_a_held_notice_carries_its_sentence_and_make_this_session_priority(
    pacer: Pacer, notifier: SlackNotifier, mock: MockSlack
) -> None:
    sid = _slack_session(pacer)
    notifier.notify(
        "held",
        {
            "session_id": sid,
            "reason": "spot_budget",
            "sentence": "Spot budget for this 5-hour window is spent.",
            "retry_at": datetime(2026, 11, 2, 9, 10, tzinfo=UTC),
            "title": "x",
        },
    )
    (call,) = mock.calls_to("chat.postMessage")
    assert (
        "is held (the spot budget).\nSpot budget for this 5-hour window is spent.\n"
        "Pacer checks again at 2026-11-02 09:10 UTC."
        in call.body["text"]
    )
    (button,) = call.body["blocks"][-1]["elements"]
    assert (button["action_id"], button["value"], button["text"]["text"]) == (
        SESSION_PRIORITY,
        str(sid),
        "Make this session priority",
    )


def test_a_session_not_born_in_slack_or_gone_posts_nothing(
    pacer: Pacer, notifier: SlackNotifier, mock: MockSlack
) -> None:
    github = _add(pacer, title="issue", genesis="github_issue", source={"repository": "o/r", "number": 3})
    notifier.notify("started", {"session_id": github})
    notifier.notify("started", {"session_id": 999})
    assert mock.calls == []


def test_events_without_a_slack_notice_are_left_alone(pacer: Pacer, notifier: SlackNotifier, mock: MockSlack) -> None:
    sid = _slack_session(pacer)
    notifier.notify("refused", {"session_id": sid, "sentence": "bookkeeping"})
    notifier.notify("status_comment", {"session_id": sid})
    notifier.notify("started", {})
    assert mock.calls == []


def test_a_queue_hold_is_announced_in_the_ops_channel_with_resume_where_it_can_work(
    notifier: SlackNotifier, mock: MockSlack
) -> None:
    hold = QueueHold(
        id=3,
        reason="rate_limit",
        sentence="The provider rate-limited Pacer; it retries after the stated reset.",
        since=T0,
        resumes_at=datetime(2026, 11, 2, 9, 35, tzinfo=UTC),
    )
    notifier.notify("queue_hold", {"hold": hold, "resumable": True})
    notifier.notify("queue_hold", {"hold": QueueHold(id=4, reason="auth", group="o/r", since=T0), "resumable": False})
    first, second = mock.calls_to("chat.postMessage")
    assert first.body["channel"] == second.body["channel"] == "C0OPS"
    assert "thread_ts" not in first.body
    assert "The queue is held: provider rate limit." in first.body["text"]
    assert "Resumes at 2026-11-02 09:35 UTC" in first.body["text"]
    assert first.body["blocks"][-1]["elements"][0]["action_id"] == QUEUE_RESUME
    assert "The `o/r` queue is held: sign-in needed." in second.body["text"]
    assert all(block["type"] != "actions" for block in second.body["blocks"])


def test_without_an_ops_channel_queue_holds_are_only_logged(pacer: Pacer, mock: MockSlack) -> None:
    quiet = SlackNotifier(pacer.engine, WebClient(token=BOT_TOKEN, base_url=mock.api_url), ops_channel=None)
    quiet.notify("queue_hold", {"hold": QueueHold(id=1, reason="credits", since=T0)})
    assert mock.calls == []


def test_with_an_edge_the_post_happens_off_the_emitting_thread(pacer: Pacer, mock: MockSlack) -> None:
    edge = SlackEdge(pacer, work_threads=1)
    notifier = SlackNotifier(
        pacer.engine, WebClient(token=BOT_TOKEN, base_url=mock.api_url), ops_channel="C0OPS", submit=edge.submit
    )
    sid = _slack_session(pacer)
    notifier.notify("started", {"session_id": sid})
    assert edge.drain(5)
    edge.close()
    (call,) = mock.calls_to("chat.postMessage")
    assert call.body["channel"] == "C0WORK"
    with dbmod.session_scope(pacer.engine) as db:
        assert db.get(Session, sid) is not None


def test_progress_edits_stay_a_gap_apart_when_the_work_pool_was_behind(pacer: Pacer, mock: MockSlack) -> None:
    """The spacing counts from when an edit is asked; the edit runs on the work pool. A pool that
    was busy (a slow or rate-limited Slack) must not then send every asked edit back to back: one
    edit answers all the asks made while one was waiting, and the next waits its gap from it."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from scheduler.store.models import Turn

    sid = _slack_session(pacer)
    with pacer.db() as db:
        db.add(Turn(session_id=sid, status="running", created_at=T0, started_at=T0, progress_at=T0,
                    progress={"tool": "Read", "detail": "a.py", "todos": None, "cost_usd": None, "tools_used": 1}))
    pool, busy = ThreadPoolExecutor(2), threading.Event()
    pool.submit(busy.wait, 10)
    pool.submit(busy.wait, 10)  # both workers busy: what is submitted now waits

    def submit(_what: str, func: Any, *args: Any) -> Any:
        return pool.submit(func, *args)

    gap = 0.3
    notifier = SlackNotifier(pacer.engine, WebClient(token=BOT_TOKEN, base_url=mock.api_url), ops_channel=None,
                             submit=submit, progress_seconds=gap)
    try:
        for _ in range(4):  # four asks a gap apart, all waiting behind the busy pool
            notifier.notify("progress", {"session_id": sid})
            time.sleep(gap + 0.05)
        busy.set()
        time.sleep(gap * 3)
        notifier.notify("progress", {"session_id": sid})  # after the backlog: a gap after the last edit
        time.sleep(gap * 3)
    finally:
        notifier.close()
        pool.shutdown(wait=True)
    calls = [c for c in mock.calls if c.method in ("chat.postMessage", "chat.update")]
    assert [c.method for c in calls][:1] == ["chat.postMessage"]
    gaps = [b.at - a.at for a, b in zip(calls, calls[1:], strict=False)]
    assert gaps and min(gaps) >= gap - 0.05, gaps


def test_a_progress_edit_slower_than_the_gap_is_not_followed_at_once(pacer: Pacer, mock: MockSlack) -> None:
    """An edit can take longer than the gap (Slack answers 429 and the client waits its
    Retry-After inside the call): an ask made meanwhile is answered a gap after that edit ends,
    not the moment it ends, and still answered."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from scheduler.store.models import Turn

    sid = _slack_session(pacer)
    with pacer.db() as db:
        db.add(Turn(session_id=sid, status="running", created_at=T0, started_at=T0, progress_at=T0,
                    progress={"tool": "Read", "detail": "a.py", "todos": None, "cost_usd": None, "tools_used": 1}))
    answer = mock._answer

    def slow(path: str, body: dict[str, Any]) -> Any:
        if path.endswith("chat.postMessage"):
            time.sleep(1.0)  # the first edit is slow
        return answer(path, body)

    mock._answer = slow  # type: ignore[method-assign]
    pool, gap = ThreadPoolExecutor(2), 0.3
    notifier = SlackNotifier(pacer.engine, WebClient(token=BOT_TOKEN, base_url=mock.api_url), ops_channel=None,
                             submit=lambda _what, func, *args: pool.submit(func, *args), progress_seconds=gap)
    try:
        for _ in range(3):  # the first posts (slowly); two more asked while it is on its way
            notifier.notify("progress", {"session_id": sid})
            time.sleep(gap + 0.05)
        time.sleep(1.5)
    finally:
        notifier.close()
        pool.shutdown(wait=True)
    calls = [c for c in mock.calls if c.method in ("chat.postMessage", "chat.update")]
    assert [c.method for c in calls] == ["chat.postMessage", "chat.update"]  # the asks meanwhile: answered, once
    assert calls[1].at - calls[0].at >= gap - 0.05, calls[1].at - calls[0].at
