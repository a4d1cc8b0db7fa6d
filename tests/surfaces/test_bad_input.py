"""Bad input from outside gets a clear 4xx and changes nothing; never a 5xx, never a traceback.

Every request is signed or authenticated and otherwise valid, sent over real HTTP to Pacer's
real app, on SQLite and PostgreSQL: prompts of whitespace only; NUL and lone UTF-16 surrogates
in any text field; integers past what their column holds; Slack bodies that are JSON but not an
object, or nested 100,000 deep; Slack timestamp headers no clock can read; chunked bodies past
PACER_MAX_BODY_BYTES. What GitHub and Slack deliver with unstorable text is cleaned and kept,
never refused: a refusal would have GitHub redeliver it for ever, or lose a Slack message whose
event id is already recorded. And one set of bounds holds on every surface: what the API takes,
`/pacer` and the console take, and what one refuses, the others refuse.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func
from sqlmodel import select

from bot.chat import answers
from bot.serve.app import create_app
from scheduler import bounds
from scheduler.store import db as dbmod
from scheduler.store.models import PolicyAudit, Session, SlackEvent, Trigger, Turn, WebhookDelivery
from tests.support.api_client import Api, make_api
from tests.support.github_support import headers as github_headers
from tests.support.github_support import issue_payload
from tests.support.github_support import make_pacer as github_pacer
from tests.support.github_support import serving as github_serving
from tests.support.slack_mock import SIGNING_SECRET, MockSlack, serving, signed_headers

BIG = 2**63
OVER_ID = bounds.MAX_ID + 1


def _count(engine: Engine, model: Any) -> int:
    with dbmod.session_scope(engine) as db:
        return int(db.exec(select(func.count()).select_from(model)).one())


def _state(engine: Engine) -> tuple[int, ...]:
    """What a refused request must leave alone."""
    return tuple(_count(engine, m) for m in (Session, Turn, Trigger, PolicyAudit, SlackEvent, WebhookDelivery))


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]


# --------------------------------------------------------------------------- the REST API


@pytest.fixture
def api(any_engine: Engine, clock: Any) -> Iterator[Api]:
    api = make_api(any_engine, clock)
    yield api
    api.close()


def _raw(api: Api, method: str, path: str, body: bytes | None, actor: str | None = "alice") -> httpx.Response:
    headers = {**api.headers(actor), "Content-Type": "application/json"}
    return api.client.request(method, f"/api/v1{path}", content=body, headers=headers)


def _session(api: Api) -> int:
    r = api.post("/sessions", {"prompt": "a session to steer", "scheduling_class": "spot"}, actor="alice")
    assert r.status_code == 201, r.text
    return int(r.json()["session"]["id"])


def _trigger(api: Api) -> int:
    body = {"name": "ops", "kind": "slack", "prompt_template": "{{ text }}", "config": {"channels": ["C0OPS2"]}}
    r = api.post("/triggers", body, actor="alice")
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


@pytest.mark.parametrize("prompt", ["   ", "\n", "\t \r\n "])
def test_a_prompt_of_only_whitespace_is_422_and_creates_nothing(
    api: Api, prompt: str, caplog: pytest.LogCaptureFixture
) -> None:
    sid = _session(api)
    before = _state(api.pacer.engine)
    r = api.post("/sessions", {"prompt": prompt})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "prompt" and "blank" in r.json()["message"]
    r = api.post(f"/sessions/{sid}/messages", {"text": prompt})
    assert r.status_code == 422 and r.json()["field"] == "text", r.text
    assert _state(api.pacer.engine) == before
    assert _errors(caplog) == []


# (method, path, raw JSON body, the field named). `{sid}` and `{tid}` are filled in.
UNSTORABLE = [
    ("POST", "/sessions", '{"prompt": "fix \\u0000 it"}', "prompt"),
    ("POST", "/sessions", '{"prompt": "fix \\ud83d it"}', "prompt"),
    ("POST", "/sessions", '{"prompt": "ok", "title": "a\\u0000"}', "title"),
    ("POST", "/sessions", '{"prompt": "ok", "concurrency_group": "g\\u0000"}', "concurrency_group"),
    ("POST", "/sessions", '{"prompt": "ok", "runtime": "echo\\u0000"}', "runtime"),
    ("POST", "/sessions/{sid}/messages", '{"text": "more \\u0000"}', "text"),
    ("POST", "/sessions/{sid}/messages", '{"text": "more \\udfff"}', "text"),
    (
        "POST",
        "/triggers",
        '{"name": "t\\u0000", "kind": "slack", "prompt_template": "x", "config": {"channels": ["C1"]}}',
        "name",
    ),
    (
        "POST",
        "/triggers",
        '{"name": "t", "kind": "slack", "prompt_template": "x\\u0000", "config": {"channels": ["C1"]}}',
        "prompt_template",
    ),
    (
        "POST",
        "/triggers",
        '{"name": "t", "kind": "slack", "prompt_template": "x", "config": {"channels": ["C\\u0000"]}}',
        "config",
    ),
    (
        "POST",
        "/triggers",
        '{"name": "t", "kind": "slack", "prompt_template": "x", "config": {"channels": ["C\\ud800"]}}',
        "config",
    ),
    (
        "POST",
        "/triggers",
        '{"name": "t", "kind": "slack", "prompt_template": "x", "config": {"chan\\u0000": ["C1"]}}',
        "config",
    ),
    ("PATCH", "/triggers/{tid}", '{"prompt_template": "y\\u0000"}', "prompt_template"),
    ("PATCH", "/triggers/{tid}", '{"concurrency_group": "\\ud800"}', "concurrency_group"),
    ("POST", "/triggers/{tid}/invoke", '{"context": {"text": "go \\u0000"}}', "context"),
    ("POST", "/triggers/{tid}/invoke", '{"context": {"text": ["go \\udc00"]}}', "context"),
    ("POST", "/triggers/{tid}/invoke", '{"title": "t\\u0000"}', "title"),
    ("POST", "/chat", '{"text": "new fix \\u0000 it"}', "text"),
    ("POST", "/chat", '{"text": "new fix \\ud800 it"}', "text"),
    ("PATCH", "/policy", '{"genesis_class_overrides": {"api\\u0000": "spot"}}', "genesis"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), UNSTORABLE)
def test_nul_or_a_lone_surrogate_in_any_text_field_is_422_naming_it(
    api: Api, method: str, path: str, body: str, field: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = path.format(sid=_session(api), tid=_trigger(api))
    before = _state(api.pacer.engine)
    r = _raw(api, method, path, body.encode())
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid_input" and r.json()["field"] == field, r.json()
    assert _state(api.pacer.engine) == before
    assert _errors(caplog) == []


# (method, path, body, the field named): integers past the column or past the shared bounds.
OUT_OF_RANGE = [
    ("POST", "/sessions", {"prompt": "ok", "precedence": 2**31}, "precedence"),
    ("POST", "/sessions", {"prompt": "ok", "precedence": BIG}, "precedence"),
    ("POST", "/sessions", {"prompt": "ok", "precedence": -BIG}, "precedence"),
    ("POST", "/sessions", {"prompt": "ok", "precedence": bounds.MAX_PRECEDENCE + 1}, "precedence"),
    ("POST", "/sessions", {"prompt": "ok", "parent_session_id": BIG}, "parent_session_id"),
    ("POST", "/sessions", {"prompt": "ok", "forked_from": OVER_ID}, "forked_from"),
    ("POST", "/sessions", {"prompt": "ok", "capacity": 2**40}, "capacity"),
    ("POST", "/sessions", {"prompt": "ok", "weight": 1e300}, "weight"),
    ("PATCH", "/sessions/{sid}", {"precedence": 2**31}, "precedence"),
    ("PATCH", "/sessions/{sid}", {"precedence": -BIG}, "precedence"),
    ("GET", f"/sessions/{BIG}", None, "session_id"),
    ("GET", f"/sessions/{OVER_ID}", None, "session_id"),
    ("PATCH", f"/sessions/{BIG}", {"precedence": 1}, "session_id"),
    ("POST", f"/sessions/{BIG}/start_now", None, "session_id"),
    ("POST", f"/sessions/{BIG}/archive", None, "session_id"),
    ("POST", f"/sessions/{BIG}/messages", {"text": "hi"}, "session_id"),
    ("GET", f"/triggers/{BIG}", None, "trigger_id"),
    ("PATCH", f"/triggers/{BIG}", {"enabled": False}, "trigger_id"),
    ("DELETE", f"/triggers/{BIG}", None, "trigger_id"),
    ("POST", f"/triggers/{BIG}/invoke", None, "trigger_id"),
    (
        "POST",
        "/triggers",
        {"name": "t", "kind": "slack", "prompt_template": "x", "precedence": 2**31, "config": {"channels": ["C1"]}},
        "precedence",
    ),
    ("PATCH", "/triggers/{tid}", {"precedence": BIG}, "precedence"),
    (
        "POST",
        "/triggers",
        {"name": "t", "kind": "ao_event", "prompt_template": "x", "config": {"session_id": BIG, "states": ["done"]}},
        "config.session_id",
    ),
    (
        "POST",
        "/triggers",
        {
            "name": "t",
            "kind": "ao_event",
            "prompt_template": "x",
            "config": {"filter": {"trigger": BIG}, "states": ["done"]},
        },
        "config.filter.trigger",
    ),
    ("PATCH", "/policy", {"max_sessions": BIG}, "max_sessions"),
    ("PATCH", "/policy", {"max_sessions": 2**31}, "max_sessions"),
    ("PATCH", "/policy", {"max_sessions": bounds.MAX_SESSIONS + 1}, "max_sessions"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), OUT_OF_RANGE)
def test_an_integer_past_its_column_is_422_naming_the_field(
    api: Api, method: str, path: str, body: Any, field: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = path.format(sid=_session(api), tid=_trigger(api))
    before = _state(api.pacer.engine)
    r = _raw(api, method, path, None if body is None else json.dumps(body).encode())
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid_input" and r.json()["field"] == field, r.json()
    assert _state(api.pacer.engine) == before
    assert _errors(caplog) == []


def test_json_nested_past_what_python_can_read_is_a_4xx_in_the_apis_own_shape(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    r = _raw(api, "POST", "/sessions", deep)
    assert r.status_code == 422 and r.json()["error"] == "invalid_input" and r.json()["field"] == "body", r.text
    nested: Any = "x"
    for _ in range(bounds.MAX_DEPTH + 1):
        nested = [nested]
    r = api.post(f"/triggers/{_trigger(api)}/invoke", {"context": {"text": nested}})
    assert r.status_code == 422 and r.json()["field"] == "context", r.text
    assert _errors(caplog) == []


# The same bounds on every surface: each row is a value at the edge of a range, as the API takes
# it and as `/pacer` (Slack and the console: both are `answers.answer`) takes it.
EDGES = [
    # (what, API request, /pacer line, accepted)
    (
        "precedence at the top",
        ("PATCH", "/sessions/{sid}", {"precedence": bounds.MAX_PRECEDENCE}),
        "rank {sid} {n}".replace("{n}", str(bounds.MAX_PRECEDENCE)),
        True,
    ),
    (
        "precedence past the top",
        ("PATCH", "/sessions/{sid}", {"precedence": bounds.MAX_PRECEDENCE + 1}),
        f"rank {{sid}} {bounds.MAX_PRECEDENCE + 1}",
        False,
    ),
    (
        "precedence at the bottom",
        ("PATCH", "/sessions/{sid}", {"precedence": -bounds.MAX_PRECEDENCE}),
        f"rank {{sid}} {-bounds.MAX_PRECEDENCE}",
        True,
    ),
    (
        "precedence past the bottom",
        ("PATCH", "/sessions/{sid}", {"precedence": -bounds.MAX_PRECEDENCE - 1}),
        f"rank {{sid}} {-bounds.MAX_PRECEDENCE - 1}",
        False,
    ),
    (
        "trigger precedence at the top",
        ("PATCH", "/triggers/{tid}", {"precedence": bounds.MAX_PRECEDENCE}),
        f"trigger {{tid}} precedence {bounds.MAX_PRECEDENCE}",
        True,
    ),
    (
        "trigger precedence past the top",
        ("PATCH", "/triggers/{tid}", {"precedence": bounds.MAX_PRECEDENCE + 1}),
        f"trigger {{tid}} precedence {bounds.MAX_PRECEDENCE + 1}",
        False,
    ),
    (
        "max_sessions at the top",
        ("PATCH", "/policy", {"max_sessions": bounds.MAX_SESSIONS}),
        f"policy set max_sessions={bounds.MAX_SESSIONS}",
        True,
    ),
    (
        "max_sessions past the top",
        ("PATCH", "/policy", {"max_sessions": bounds.MAX_SESSIONS + 1}),
        f"policy set max_sessions={bounds.MAX_SESSIONS + 1}",
        False,
    ),
    ("max_sessions of zero", ("PATCH", "/policy", {"max_sessions": 0}), "policy set max_sessions=0", False),
    ("the largest id", ("GET", f"/sessions/{bounds.MAX_ID}", None), f"why {bounds.MAX_ID}", True),
    ("an id past the column", ("GET", f"/sessions/{OVER_ID}", None), f"why {OVER_ID}", False),
    ("an id of zero", ("GET", "/sessions/0", None), "why 0", False),
]


@pytest.mark.parametrize(("what", "request_", "line", "accepted"), EDGES, ids=[row[0] for row in EDGES])
def test_the_api_and_pacer_accept_the_same_ranges(
    api: Api, what: str, request_: tuple[str, str, Any], line: str, accepted: bool
) -> None:
    sid, tid = _session(api), _trigger(api)
    method, path, body = request_
    r = _raw(api, method, path.format(sid=sid, tid=tid), None if body is None else json.dumps(body).encode())
    # An id in range that names nothing is a 404: the value itself was accepted.
    assert (r.status_code in (200, 404)) is accepted and (r.status_code == 422) is not accepted, r.text
    reply = answers.answer(api.pacer, "alice", line.format(sid=sid, tid=tid), surface="console")
    refused_as_input = not reply.ok and "does not exist" not in reply.text
    assert refused_as_input is not accepted, reply.text


def test_a_chunked_body_past_the_limit_is_413_and_read_no_further(
    any_engine: Engine, clock: Any, request: pytest.FixtureRequest
) -> None:
    api = make_api(any_engine, clock, PACER_MAX_BODY_BYTES="4096")
    request.addfinalizer(api.close)
    sent = 0

    def chunks() -> Iterator[bytes]:
        nonlocal sent
        body = json.dumps({"prompt": "x" * 60_000}).encode()
        for start in range(0, len(body), 1024):
            sent += 1
            yield body[start : start + 1024]

    headers = {**api.headers("alice"), "Content-Type": "application/json"}
    r = api.client.post("/api/v1/sessions", content=chunks(), headers=headers)
    assert "content-length" not in {k.lower() for k in r.request.headers}
    assert r.status_code == 413, r.text
    assert r.json()["error"] == "too_large" and "PACER_MAX_BODY_BYTES" in r.json()["message"]
    assert _count(any_engine, Session) == 0
    small = api.client.post("/api/v1/sessions", content=iter([b'{"prompt": ', b'"small"}']), headers=headers)
    assert small.status_code == 201, small.text


# --------------------------------------------------------------------------- Slack


@pytest.fixture
def slack_any(any_engine: Engine, clock: Any, deferrer: Any, mock: MockSlack) -> Iterator[Any]:
    with dbmod.session_scope(any_engine) as db:
        db.add(
            Trigger(
                name="ops",
                kind="slack",
                prompt_template="{{ text }}",
                config={"channels": ["C0WORK"]},
                created_at=clock.now(),
            )
        )
    with serving(any_engine, clock, deferrer, mock, PACER_MAX_BODY_BYTES="1048576") as client:
        yield client


NOT_OBJECTS = [
    "[]",
    '"text"',
    "1",
    "null",
    "true",
    "[" * 100_000 + "]" * 100_000,
    '{"a": ' * 50_000 + "1" + "}" * 50_000,
]


@pytest.mark.parametrize(
    "body", NOT_OBJECTS, ids=["list", "string", "number", "null", "bool", "deep-list", "deep-object"]
)
def test_a_signed_slack_body_that_is_not_a_json_object_is_400(
    slack_any: Any, body: str, caplog: pytest.LogCaptureFixture
) -> None:
    response = slack_any.post(body, content_type="application/json")
    assert response.status_code == 400, response.text
    form = slack_any.post("payload=" + body[:1000])  # an interactivity form whose payload is no object
    assert form.status_code == 400, form.text
    assert slack_any.http.get("/healthz").status_code == 200
    assert _errors(caplog) == []


@pytest.mark.parametrize("timestamp", [b"9" * 400, b"\xb2", b"1\xb9", b"\xb3" * 10, b"0" * 30])
def test_a_slack_timestamp_no_clock_can_read_is_401(
    slack_any: Any, timestamp: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    body = '{"type": "event_callback"}'
    headers: dict[str, Any] = signed_headers(SIGNING_SECRET, body, content_type="application/json")
    headers["X-Slack-Request-Timestamp"] = timestamp
    response = slack_any.http.post("/slack/events", content=body.encode(), headers=headers)
    assert response.status_code == 401, response.text
    assert _errors(caplog) == []


@pytest.mark.parametrize(
    ("text", "stored"),
    [("fix \x00 it", "fix \ufffd it"), ("fix \ud83d it", "fix \ufffd it"), ("\udc00 \x00", "\ufffd \ufffd")],
)
def test_a_slack_message_with_unstorable_text_is_kept_cleaned_never_dropped(
    slack_any: Any, any_engine: Engine, text: str, stored: str, caplog: pytest.LogCaptureFixture
) -> None:
    message = {
        "type": "message",
        "channel": "C0WORK",
        "channel_type": "channel",
        "user": "UMEM",
        "text": text,
        "ts": "1790000000.000100",
    }
    assert slack_any.event(message, event_id="Ev\x00Bad").status_code == 200
    assert slack_any.event(message, event_id="Ev\x00Bad", retry_num=1).status_code == 200
    slack_any.settle()
    with dbmod.session_scope(any_engine) as db:
        prompts = [s.prompt for s in db.exec(select(Session))]
        events = list(db.exec(select(SlackEvent.event_id)))
    assert prompts == [stored] and events == ["Ev\ufffdBad"]
    assert _errors(caplog) == []


# --------------------------------------------------------------------------- GitHub


@pytest.fixture
def hook_any(any_engine: Engine, clock: Any, deferrer: Any) -> Iterator[tuple[httpx.Client, Any]]:
    pacer = github_pacer(any_engine, clock, deferrer)
    with dbmod.session_scope(any_engine) as db:
        db.add(
            Trigger(
                name="issues",
                kind="github_issue",
                prompt_template="Fix {{ title }}: {{ body }}",
                created_at=clock.now(),
            )
        )
    app = create_app(pacer, start_scheduler=False)
    with github_serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client, app.state.github


def _deliver(hook: tuple[httpx.Client, Any], payload: Any, *, delivery: str, event: str = "issues") -> httpx.Response:
    client, edge = hook
    body = json.dumps(payload).encode()
    response = client.post("/github/webhook", content=body, headers=github_headers(event, body, delivery=delivery))
    assert edge.drain(10)
    return response


@pytest.mark.parametrize(
    ("title", "body", "prompt"),
    [
        ("crash\x00", "on NUL\x00", "Fix crash\ufffd: on NUL\ufffd"),
        ("emoji \ud83d", "half \udca9 a pair", "Fix emoji \ufffd: half \ufffd a pair"),
    ],
)
def test_github_text_that_cannot_be_stored_is_cleaned_and_recorded_once(
    hook_any: tuple[httpx.Client, Any],
    any_engine: Engine,
    title: str,
    body: str,
    prompt: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    payload = issue_payload(title=title, body=body, author="alice\x00")
    first = _deliver(hook_any, payload, delivery="guid-1")
    assert first.status_code == 202, first.text
    again = _deliver(hook_any, payload, delivery="guid-1")
    assert again.status_code == 200, again.text
    with dbmod.session_scope(any_engine) as db:
        sessions = list(db.exec(select(Session)))
    assert [s.prompt for s in sessions] == [prompt]
    assert sessions[0].source["author"] == "alice\ufffd"
    assert _errors(caplog) == []


@pytest.mark.parametrize(
    "payload", [issue_payload(number=BIG), issue_payload(number=OVER_ID), issue_payload(repository="octo\x00/app")]
)
def test_github_numbers_and_names_no_issue_can_have_start_nothing_and_are_answered_200(
    hook_any: tuple[httpx.Client, Any], any_engine: Engine, payload: Any, caplog: pytest.LogCaptureFixture
) -> None:
    response = _deliver(hook_any, payload, delivery="guid-9")
    assert response.status_code == 200, response.text
    assert _count(any_engine, Session) == 0 and _count(any_engine, WebhookDelivery) == 0
    assert _errors(caplog) == []
