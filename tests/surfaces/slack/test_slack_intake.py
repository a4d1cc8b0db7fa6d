"""Slack intake through the real Bolt app: signed events in, sessions and human messages out,
and what Pacer posted back into the thread (on a loopback mock of Slack's Web API)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlmodel import select

from scheduler.store import db as dbmod
from scheduler.store.models import HumanMessage, Session, Trigger, Turn
from templates import render
from tests.support.slack_mock import serving


def _msg(**extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": "D0DM",
        "channel_type": "im",
        "user": "UMEM",
        "text": "fix the flaky login test",
        "ts": "1790000000.000100",
        **extra,
    }


def _sessions(engine) -> list[Session]:
    with dbmod.session_scope(engine) as db:
        return list(db.exec(select(Session).order_by(Session.id)).all())


def test_a_dm_from_a_rostered_user_becomes_a_priority_slack_session_that_talks_in_its_thread(
    engine, clock, deferrer, mock
) -> None:
    with serving(engine, clock, deferrer, mock) as slack:
        slack.event(_msg(), event_id="Ev1")
        slack.settle()
        [session] = _sessions(engine)
        assert (session.genesis, session.scheduling_class, session.requester) == ("slack", None, "UMEM")
        assert session.thread_key == "D0DM:1790000000.000100" and session.prompt == "fix the flaky login test"
        assert session.status == "running"
        slack.settle()
    posts = [c for c in mock.calls_to("chat.postMessage") if c.body.get("thread_ts") == "1790000000.000100"]
    assert posts and posts[0].body["channel"] == "D0DM"


def test_a_channel_message_starts_work_only_through_a_trigger(engine, clock, deferrer, mock) -> None:
    with dbmod.session_scope(engine) as db:
        db.add(Trigger(name="ops", kind="slack", scheduling_class="spot", precedence=30, created_at=clock.now(),
                       prompt_template="From {{ user }} in #ops: {{ text }}", config={"channels": ["C0OPS2"]}))
    with serving(engine, clock, deferrer, mock) as slack:
        slack.event(_msg(channel="C0OTHER", channel_type="channel"), event_id="Ev1")
        slack.event(_msg(channel="C0OPS2", channel_type="channel", ts="1790000000.000200"), event_id="Ev2")
        slack.event(_msg(user="USTRANGER", ts="1790000000.000300"), event_id="Ev3")  # a DM from off the roster
        slack.settle()
    [session] = _sessions(engine)
    assert (session.scheduling_class, session.class_from_trigger, session.precedence) == ("spot", True, 30)
    assert session.prompt == "From UMEM in #ops: fix the flaky login test"


def test_a_reply_in_the_thread_from_a_rostered_human_is_a_human_message_delivered_as_the_next_turn(
    engine, clock, deferrer, mock
) -> None:
    with serving(engine, clock, deferrer, mock) as slack:
        slack.event(_msg(), event_id="Ev1")
        slack.settle()
        sid = _sessions(engine)[0].id
        slack.event(
            _msg(user="UOPS", text="also check the logout path", ts="1790000005.000100", thread_ts="1790000000.000100"),
            event_id="Ev2",
        )
        slack.event(
            _msg(user="USTRANGER", text="ignore me", ts="1790000006.000100", thread_ts="1790000000.000100"),
            event_id="Ev3",
        )
        slack.settle()
        deferrer.advance(timedelta(minutes=30))  # the first turn ends; the reply is delivered next
    with dbmod.session_scope(engine) as db:
        messages = db.exec(select(HumanMessage)).all()
        assert [(m.session_id, m.actor, m.surface, m.text) for m in messages] == [
            (sid, "UOPS", "slack_thread", "also check the logout path")
        ]
        prompts = [t.prompt for t in db.exec(select(Turn).where(Turn.session_id == sid).order_by(Turn.id))]
    assert prompts == ["fix the flaky login test", "also check the logout path"]
    assert len(_sessions(engine)) == 1  # a reply is never a new session
    # Its sender is told the running turn's agent takes no messages mid-turn: it waits for the turn's end.
    told = [c.body["text"] for c in mock.calls_to("chat.postMessage") if "Your reply to" in str(c.body.get("text"))]
    assert told == [f":speech_balloon: Your reply to *#{sid}* is queued for the next turn: the agent at work takes "
                    "no messages mid-turn, so yours is delivered when this turn ends."]


def _pacer_lines(caplog: pytest.LogCaptureFixture, who: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("pacer") and who in r.getMessage()]


def test_a_dm_from_off_the_roster_starts_nothing_even_through_a_dms_trigger_and_is_told_why(
    engine, clock, deferrer, mock, caplog: pytest.LogCaptureFixture
) -> None:
    with dbmod.session_scope(engine) as db:  # as deploy/triggers.example.toml ships it
        db.add(Trigger(name="slack-help", kind="slack", created_at=clock.now(), prompt_template="{{ text }}",
                       config={"channels": ["C0HELP"], "dms": True}))
    caplog.set_level("INFO", logger="pacer.intake.slack")
    with serving(engine, clock, deferrer, mock) as slack:
        slack.event(_msg(user="USTRANGER"), event_id="Ev1")
        slack.settle()
    assert _sessions(engine) == []
    [told] = mock.calls_to("chat.postMessage")
    assert told.body["channel"] == "D0DM" and told.body["text"] == render("slack/not_on_roster.j2", user="USTRANGER")
    assert "roster" in told.body["text"] and "PACER_ROSTER=USTRANGER=member" in told.body["text"]
    [line] = _pacer_lines(caplog, "USTRANGER")
    assert "not on the roster" in line and "ignored" in line


def test_a_message_from_off_the_roster_in_a_trigger_channel_starts_nothing_and_only_its_sender_is_told(
    engine, clock, deferrer, mock, caplog: pytest.LogCaptureFixture
) -> None:
    with dbmod.session_scope(engine) as db:
        db.add(
            Trigger(
                name="ops",
                kind="slack",
                created_at=clock.now(),
                prompt_template="{{ text }}",
                config={"channels": ["C0HELP"]},
            )
        )
    caplog.set_level("INFO", logger="pacer.intake.slack")
    with serving(engine, clock, deferrer, mock) as slack:
        slack.event(_msg(user="USTRANGER", channel="C0HELP", channel_type="channel"), event_id="Ev1")
        slack.event(
            _msg(user="UOUTSIDER", channel="C0RANDOM", channel_type="channel", ts="1790000000.000200"), event_id="Ev2"
        )
        slack.settle()
        assert _sessions(engine) == []
        [told] = mock.calls_to("chat.postEphemeral")  # only the sender sees it; the channel sees nothing
        assert (told.body["channel"], told.body["user"]) == ("C0HELP", "USTRANGER")
        assert told.body["text"] == render("slack/not_on_roster.j2", user="USTRANGER")
        assert mock.calls_to("chat.postMessage") == []
        [line] = _pacer_lines(caplog, "USTRANGER")
        assert "not on the roster" in line and "ignored" in line
        # A channel no trigger names is not Pacer's to answer in, whoever speaks.
        [line] = _pacer_lines(caplog, "UOUTSIDER")
        assert "matches no slack trigger" in line
        # The same message from a rostered user starts work.
        slack.event(_msg(channel="C0HELP", channel_type="channel", ts="1790000000.000300"), event_id="Ev3")
        slack.settle()
    [session] = _sessions(engine)
    assert (session.requester, session.genesis) == ("UMEM", "slack")


def test_a_message_over_the_prompt_limit_starts_nothing_and_its_sender_is_told(engine, clock, deferrer, mock) -> None:
    with serving(engine, clock, deferrer, mock, PACER_MAX_PROMPT_CHARS="50") as slack:
        slack.event(_msg(text="x" * 51), event_id="Ev1")
        slack.settle()
        slack.event(_msg(text="x" * 51), event_id="Ev1")  # Slack's retry of it: recorded, not run twice
        slack.settle()
    assert _sessions(engine) == []
    [told] = mock.calls_to("chat.postMessage")
    assert told.body["channel"] == "D0DM" and told.body["text"] == render(
        "slack/message_too_long.j2", chars=51, limit=50
    )


def test_a_session_born_in_slack_links_its_own_thread(engine, clock, deferrer, mock) -> None:
    """The live page links the thread, not just its channel: Slack's message link, from the
    workspace's address `auth.test` gives (the mock's https://pacer-test.slack.com/)."""
    from scheduler.steering.session_facts import links

    with serving(engine, clock, deferrer, mock) as slack:
        slack.event(_msg(), event_id="Ev1")
        slack.event(_msg(ts="1790000009.000200", text="and the signup test"), event_id="Ev2")
        slack.settle()
    first, second = _sessions(engine)
    assert first.source["slack"]["url"] == "https://pacer-test.slack.com/archives/D0DM/p1790000000000100"
    assert [(link.kind, link.url) for link in links(second.source)] == [
        ("slack_thread", "https://pacer-test.slack.com/archives/D0DM/p1790000009000200")
    ]
    assert len(mock.calls_to("auth.test")) >= 1


@pytest.mark.parametrize(
    ("workspace", "channel", "ts"),
    [
        (None, "C1", "1790000000.000100"),
        ("http://x.slack.com/", "C1", "1.2"),
        ("https://x.slack.com/", "C/1", "1.2"),
        ("https://x.slack.com/", "C1", "17900"),
        ("https://x.slack.com/", "C1", "a.b"),
        ("https://x.slack.com/", None, "1.2"),
    ],
)
def test_without_a_workspace_or_a_well_formed_thread_the_link_is_the_channels(workspace, channel, ts) -> None:
    from integrations.slack.notifier import thread_link, thread_source
    from scheduler.steering.session_facts import SLACK_CHANNEL, links

    assert thread_link(workspace, channel, ts) is None
    source = thread_source({"channel": channel, "ts": ts, "user": "U1"}, workspace)
    assert "url" not in source
    expected = [("slack_thread", SLACK_CHANNEL.format(channel=channel))] if channel == "C1" else []
    assert [(link.kind, link.url) for link in links({"slack": source})] == expected
