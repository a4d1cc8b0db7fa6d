"""/slack/events at the door: signatures, replay window, body size, malformed bodies, start-up.

Every request here is a real signed (or deliberately mis-signed) HTTP request into Pacer's real
FastAPI app, which hands it to the real Bolt app; the Web API is the loopback mock.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import Engine

from bot.serve.app import create_app
from scheduler.errors import ConfigError
from tests.support.slack_mock import (
    BOT_TOKEN,
    MockSlack,
    command_body,
    make_pacer,
    pacer_settings,
    signed_headers,
)


def _responses(mock: MockSlack) -> list[str]:
    return [c.path for c in mock.calls if c.path.startswith("/response/")]


def test_a_bad_signature_is_refused_with_401_and_nothing_is_answered(slack, mock: MockSlack) -> None:
    body = command_body("help", user="UOPS", response_url=mock.response_url())
    response = slack.post(body, secret="not-the-signing-secret")
    assert response.status_code == 401
    assert "signature" in response.text
    slack.settle()
    assert _responses(mock) == []


def test_a_missing_signature_is_refused_with_401(slack, mock: MockSlack) -> None:
    body = command_body("help", user="UOPS", response_url=mock.response_url())
    response = slack.http.post(
        "/slack/events", content=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert response.status_code == 401


def test_a_garbage_timestamp_is_refused_with_401_not_a_crash(slack, mock: MockSlack) -> None:
    body = command_body("help", user="UOPS", response_url=mock.response_url())
    headers = signed_headers("x", body)
    headers["X-Slack-Request-Timestamp"] = "yesterday"
    assert slack.http.post("/slack/events", content=body, headers=headers).status_code == 401


def test_a_stale_timestamp_is_refused_even_when_correctly_signed(slack, mock: MockSlack) -> None:
    body = command_body("help", user="UOPS", response_url=mock.response_url())
    for age_seconds in (301, 3600, -301):
        assert slack.post(body, timestamp=int(time.time()) - age_seconds).status_code == 401
    slack.settle()
    assert _responses(mock) == []


def test_a_body_over_the_limit_is_refused_with_413_before_anything_else(slack, mock: MockSlack) -> None:
    body = command_body("x" * 5000, user="UOPS", response_url=mock.response_url())
    response = slack.post(body)
    assert response.status_code == 413
    assert "4096 bytes" in response.text
    # The size check comes first: an unsigned oversized body is a 413 too, not a 401.
    unsigned = slack.http.post(
        "/slack/events", content=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert unsigned.status_code == 413


def test_a_signed_body_that_is_not_json_is_400_not_500(slack) -> None:
    response = slack.post("{not json", content_type="application/json")
    assert response.status_code == 400
    raw = b'{"type": "\xff\xfe"}'  # signed, but not UTF-8
    headers = signed_headers("8f742231b10e8888abcd99yyyzzz85a5", raw, content_type="application/json")
    assert slack.http.post("/slack/events", content=raw, headers=headers).status_code == 400


def test_url_verification_is_answered_with_the_challenge(slack) -> None:
    response = slack.post(
        '{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}',
        content_type="application/json",
    )
    assert response.status_code == 200
    assert response.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}


def test_start_up_checks_the_token_once_with_auth_test(slack, mock: MockSlack) -> None:
    calls = mock.calls_to("auth.test")
    assert len(calls) == 1
    assert calls[0].headers["Authorization"] == f"Bearer {BOT_TOKEN}"


def test_a_token_slack_refuses_stops_start_up_naming_the_variable(
    engine: Engine, clock, deferrer, mock: MockSlack
) -> None:
    mock.errors["auth.test"] = "invalid_auth"
    pacer = make_pacer(engine, clock, deferrer, pacer_settings(mock))
    with pytest.raises(ConfigError, match=r"SLACK_BOT_TOKEN: .*invalid_auth") as raised:
        create_app(pacer, start_scheduler=False)
    assert BOT_TOKEN not in str(raised.value)


def test_without_slack_credentials_nothing_is_mounted(engine: Engine, clock, deferrer, mock: MockSlack) -> None:
    settings = pacer_settings(mock, SLACK_SIGNING_SECRET="")
    app = create_app(make_pacer(engine, clock, deferrer, settings), start_scheduler=False)
    assert "/slack/events" not in {getattr(route, "path", "") for route in app.routes}
    assert mock.calls == []


def test_verify_token_off_makes_no_call_at_start_up(engine: Engine, clock, deferrer, mock: MockSlack) -> None:
    from bot.slack.app import build_bolt_app

    pacer = make_pacer(engine, clock, deferrer, pacer_settings(mock))
    app = build_bolt_app(pacer, verify_token=False)
    assert mock.calls == []
    assert app.client.base_url == mock.api_url


SLACK_DOCS_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
    b"&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
    b"&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
SLACK_DOCS_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


@pytest.mark.parametrize(
    ("timestamp", "signature", "body", "now", "valid"),
    [
        ("1531420618", SLACK_DOCS_SIGNATURE, SLACK_DOCS_BODY, 1531420618, True),  # Slack's published example
        ("1531420618", SLACK_DOCS_SIGNATURE, SLACK_DOCS_BODY, 1531420618 + 300, True),  # the window's edge
        ("1531420618", SLACK_DOCS_SIGNATURE, SLACK_DOCS_BODY, 1531420618 + 301, False),  # replayed too late
        ("1531420618", SLACK_DOCS_SIGNATURE, SLACK_DOCS_BODY, 1531420618 - 301, False),  # from the future
        ("1531420618", SLACK_DOCS_SIGNATURE, SLACK_DOCS_BODY + b"&x=1", 1531420618, False),  # body changed
        ("1531420619", SLACK_DOCS_SIGNATURE, SLACK_DOCS_BODY, 1531420618, False),  # timestamp changed
        ("1531420618", SLACK_DOCS_SIGNATURE.upper(), SLACK_DOCS_BODY, 1531420618, False),
        ("1531420618", "", SLACK_DOCS_BODY, 1531420618, False),
        ("", SLACK_DOCS_SIGNATURE, SLACK_DOCS_BODY, 1531420618, False),
        ("-5", SLACK_DOCS_SIGNATURE, SLACK_DOCS_BODY, 1531420618, False),
        ("1531420618", SLACK_DOCS_SIGNATURE, b"\xff" + SLACK_DOCS_BODY, 1531420618, False),  # not UTF-8
    ],
)
def test_is_signed_follows_slacks_v0_scheme(timestamp: str, signature: str, body: bytes, now: int, valid: bool) -> None:
    from bot.slack.http import is_signed

    headers = {"x-slack-request-timestamp": timestamp, "x-slack-signature": signature}
    assert is_signed(b"8f742231b10e8888abcd99yyyzzz85a5", headers, body, now=now) is valid
