"""`@Pacer <prompt>` in a channel (app_mention): a session answered in that thread, started by a
rostered member wherever Pacer is; a mention in a channel a trigger names, or in a session's
thread, is left to the message listener, so one message makes one session."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.store.db import session_scope
from scheduler.store.models import HumanMessage, Session, Trigger
from tests.support.slack_mock import BOT_USER_ID, MockSlack, serving


def _mention(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "app_mention", "channel": "C0RANDOM", "user": "UMEM", "text": f"<@{BOT_USER_ID}> {text}",
            "ts": "1790000000.000100", **extra}


def _sessions(engine: Engine) -> list[Session]:
    with DBSession(engine) as db:
        return list(db.exec(select(Session).order_by(col(Session.id))).all())


def test_a_mention_starts_a_session_answered_in_its_thread(
    engine: Engine, clock: Any, deferrer: Any, mock: MockSlack
) -> None:
    with serving(engine, clock, deferrer, mock) as slack:
        assert slack.event(_mention("fix the flaky login test"), event_id="Ev1").status_code == 200
        assert slack.event(_mention("fix the flaky login test"), event_id="Ev1", retry_num=1).status_code == 200
        slack.settle()
        (session,) = _sessions(engine)
        assert (session.genesis, session.requester, session.prompt) == ("slack", "UMEM", "fix the flaky login test")
        assert session.thread_key == "C0RANDOM:1790000000.000100"
        posts = mock.wait_for_method("chat.postMessage")
    assert posts[0].body["channel"] == "C0RANDOM" and posts[0].body["thread_ts"] == "1790000000.000100"


def test_a_stranger_is_told_why_and_nothing_starts(engine: Engine, clock: Any, deferrer: Any, mock: MockSlack) -> None:
    with serving(engine, clock, deferrer, mock) as slack:
        slack.event(_mention("delete everything", user="USTRANGER"), event_id="Ev2")
        slack.settle()
        (ephemeral,) = mock.wait_for_method("chat.postEphemeral")
    assert _sessions(engine) == [] and ephemeral.body["user"] == "USTRANGER"


def test_what_the_message_listener_takes_is_left_to_it(
    engine: Engine, clock: Any, deferrer: Any, mock: MockSlack
) -> None:
    with session_scope(engine) as db:
        db.add(Trigger(name="work", kind="slack", config={"channels": ["C0WORK"]}, created_at=clock.now()))
    with serving(engine, clock, deferrer, mock) as slack:
        slack.event(_mention("first", channel="C0WORK"), event_id="Ev3")  # the channel's trigger takes the message
        slack.event(_mention("work"), event_id="Ev4")
        slack.settle()
        (session,) = _sessions(engine)
        slack.event(_mention("and the docs", ts="1790000005.000100", thread_ts="1790000000.000100"), event_id="Ev5")
        slack.settle()
        assert len(_sessions(engine)) == 1
    with DBSession(engine) as db:
        assert db.exec(select(HumanMessage)).all() == []  # the thread reply arrives as a message event, not this one
    assert session.prompt == "work"
