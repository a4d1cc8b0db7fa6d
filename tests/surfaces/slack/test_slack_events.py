"""Events API through the real app: messages reach intake once, bots and subtypes never do."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Engine, func
from sqlmodel import select

from bot.runtime.process import Pacer
from bot.slack.events import is_ignored, record_event
from scheduler.store import db as dbmod
from scheduler.store.models import SlackEvent
from tests.support.slack_mock import BOT_ID, BOT_USER_ID, MockSlack, make_pacer, serving


class Handoff:
    """The intake seam: what the edge handed on, in order."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, pacer: Pacer, event: dict[str, Any]) -> None:
        with self._lock:
            self.events.append(event)


def _message(**extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": "C0WORK",
        "user": "UMEM",
        "text": "please fix the flaky test",
        "ts": "1790000000.000100",
        "channel_type": "channel",
        **extra,
    }


def _stored(engine: Engine) -> list[str]:
    with dbmod.session_scope(engine) as db:
        return list(db.exec(select(SlackEvent.event_id).order_by(SlackEvent.event_id)).all())


def test_a_retry_with_the_same_event_id_creates_one_record_and_one_handoff(
    any_engine: Engine, clock, deferrer, mock: MockSlack
) -> None:
    handoff = Handoff()
    with serving(any_engine, clock, deferrer, mock) as slack:
        slack.surface.edge.intake = handoff
        first = slack.event(_message(), event_id="Ev0001")
        retry = slack.event(_message(), event_id="Ev0001", retry_num=1)
        again = slack.event(_message(), event_id="Ev0001", retry_num=2)
        slack.settle()
    assert [first.status_code, retry.status_code, again.status_code] == [200, 200, 200]
    assert _stored(any_engine) == ["Ev0001"]
    assert [e["text"] for e in handoff.events] == ["please fix the flaky test"]
    assert handoff.events[0]["channel"] == "C0WORK"


def test_distinct_messages_and_dms_each_reach_intake(engine: Engine, clock, deferrer, mock: MockSlack) -> None:
    handoff = Handoff()
    with serving(engine, clock, deferrer, mock) as slack:
        slack.surface.edge.intake = handoff
        slack.event(_message(), event_id="Ev0001")
        slack.event(
            _message(channel="D0DM", channel_type="im", text="run the nightly", ts="1790000001.000200"),
            event_id="Ev0002",
        )
        slack.event(
            _message(thread_ts="1790000000.000100", ts="1790000002.000300", text="also the docs"), event_id="Ev0003"
        )
        slack.settle()
    assert _stored(engine) == ["Ev0001", "Ev0002", "Ev0003"]
    assert sorted(e["text"] for e in handoff.events) == [
        "also the docs",
        "please fix the flaky test",
        "run the nightly",
    ]


IGNORED = {
    "pacer-itself": _message(bot_id=BOT_ID, user=BOT_USER_ID),
    "another-bot": _message(bot_id="B0OTHER", subtype="bot_message", user=None),
    "another-bot-with-a-user": _message(bot_id="B0OTHER"),
    "an-edit": _message(subtype="message_changed"),
    "a-join": _message(subtype="channel_join"),
    "no-user": _message(user=None),
}


def test_bot_and_subtype_messages_are_ignored(engine: Engine, clock, deferrer, mock: MockSlack) -> None:
    handoff = Handoff()
    with serving(engine, clock, deferrer, mock) as slack:
        slack.surface.edge.intake = handoff
        for n, event in enumerate(IGNORED.values()):
            assert (
                slack.event({k: v for k, v in event.items() if v is not None}, event_id=f"Ev0BOT{n}").status_code == 200
            )
        slack.settle()
    assert _stored(engine) == []
    assert handoff.events == []
    assert [c.method for c in mock.calls] == ["auth.test"]  # nothing was posted anywhere


def test_is_ignored_lets_only_plain_human_messages_through() -> None:
    assert not is_ignored(_message())
    assert not is_ignored(_message(thread_ts="1.2"))
    assert is_ignored(_message(subtype="file_share"))
    assert is_ignored({"type": "message", "text": "no author"})


def test_racing_deliveries_of_one_event_record_it_once(any_engine: Engine, clock, deferrer, mock: MockSlack) -> None:
    from bot.config.settings import load

    pacer = make_pacer(any_engine, clock, deferrer, load({}, toml_path=None))
    outcomes: list[bool] = []
    barrier = threading.Barrier(6)

    def deliver() -> None:
        barrier.wait()
        outcomes.append(record_event(pacer, "EvRACE"))

    threads = [threading.Thread(target=deliver) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == [False] * 5 + [True]
    with dbmod.session_scope(any_engine) as db:
        assert db.exec(select(func.count()).select_from(SlackEvent)).one() == 1


def test_app_home_opened_on_the_messages_tab_publishes_nothing(
    engine: Engine, clock, deferrer, mock: MockSlack
) -> None:
    with serving(engine, clock, deferrer, mock) as slack:
        event = {"type": "app_home_opened", "user": "UMEM", "channel": "D0DM", "tab": "messages"}
        assert slack.event(event, event_id="EvHOME0").status_code == 200
        slack.settle()
    assert mock.calls_to("views.publish") == []
