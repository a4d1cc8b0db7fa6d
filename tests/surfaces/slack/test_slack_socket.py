"""Socket Mode: the same Bolt app and listeners, reached over a WebSocket Pacer opens itself.

The Web API is the loopback mock (it hands out the WebSocket URL); the WebSocket end is a small
loopback RFC 6455 server. Envelopes are what Slack sends; what is asserted is the ack that goes
back over the socket and what Pacer then posted, and where.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from sqlmodel import select

from scheduler.store import db as dbmod
from scheduler.store.models import SlackEvent
from tests.support.slack_mock import TEAM_ID, MockSlack, serving
from tests.support.slack_socket_mock import MockSocketMode

APP_TOKEN = "xapp-1-A0PACER-0000-test"


@pytest.fixture
def ws(mock: MockSlack) -> Iterator[MockSocketMode]:
    server = MockSocketMode()
    mock.socket_url = server.url
    yield server
    server.stop()


def test_socket_mode_connects_at_start_acks_over_the_socket_and_answers(
    engine: Engine, clock, deferrer, mock: MockSlack, ws: MockSocketMode
) -> None:
    with serving(engine, clock, deferrer, mock, SLACK_APP_TOKEN=APP_TOKEN) as slack:
        (opened,) = mock.calls_to("apps.connections.open")
        assert opened.headers["Authorization"] == f"Bearer {APP_TOKEN}"
        assert ws.connections == 1

        ws.send({
            "envelope_id": "env-cmd-1", "type": "slash_commands", "accepts_response_payload": True,
            "payload": {
                "team_id": TEAM_ID, "channel_id": "C0GENERAL", "user_id": "UOPS", "command": "/pacer", "text": "help",
                "api_app_id": "A0PACER", "response_url": mock.response_url("socket"), "trigger_id": "1.2.3",
            },
        })
        assert ws.wait_for_ack("env-cmd-1") == {"envelope_id": "env-cmd-1"}
        (answer,) = mock.wait_for_method("/response/socket")
        assert answer.body["response_type"] == "ephemeral"
        assert "`/pacer help [command]`" in answer.body["text"]

        message = {
            "type": "event_callback",
            "team_id": TEAM_ID,
            "api_app_id": "A0PACER",
            "event_id": "EvSOCK1",
            "event": {
                "type": "message",
                "channel": "D0DM",
                "channel_type": "im",
                "user": "UMEM",
                "text": "nightly run",
                "ts": "1790000000.000100",
            },
        }
        for attempt in range(2):  # Slack redelivers when an ack is late: the second creates nothing
            ws.send(
                {
                    "envelope_id": f"env-ev-{attempt}",
                    "type": "events_api",
                    "retry_attempt": attempt,
                    "retry_reason": "",
                    "payload": message,
                }
            )
            ws.wait_for_ack(f"env-ev-{attempt}")
        slack.settle()
    with dbmod.session_scope(engine) as db:
        assert list(db.exec(select(SlackEvent.event_id)).all()) == ["EvSOCK1"]


def test_without_an_app_token_no_socket_is_opened(
    engine: Engine, clock, deferrer, mock: MockSlack, ws: MockSocketMode
) -> None:
    with serving(engine, clock, deferrer, mock) as slack:
        assert slack.surface.socket is None
    assert mock.calls_to("apps.connections.open") == []
    assert ws.connections == 0
