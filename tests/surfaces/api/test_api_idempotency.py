"""POST /api/v1/sessions with an `Idempotency-Key`, over real HTTP into the real app, on SQLite and
PostgreSQL: a client's retry after a lost answer gets the first answer and makes no second
session; the key is the caller's own, names one body, is bounded, and is forgotten after 24 hours."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DBSession
from sqlmodel import func, select

from bot.api.idempotency import KEPT
from scheduler.store.db import session_scope
from scheduler.store.models import IdempotencyKey, Session
from tests.support.api_client import TOKEN, make_api

KEY = "8e03978e-40d5-43e8-bc93-6894a57f9324"


@pytest.fixture
def api(any_engine: Engine, clock: Any) -> Iterator[Any]:
    api = make_api(any_engine, clock, max_sessions=4)
    yield api
    api.close()


def create(api: Any, body: dict[str, Any], key: str | None = KEY, actor: str | None = None) -> httpx.Response:
    """POST as `actor` with their own token, or as the automation with the shared one."""
    headers: dict[str, Any] = api.headers(actor)
    if key is not None:
        headers["Idempotency-Key"] = key.encode("latin-1")  # as sent: HTTP carries Latin-1
    return api.client.post("/api/v1/sessions", json=body, headers=headers)


def sessions(engine: Engine) -> int:
    with DBSession(engine) as db:
        return int(db.exec(select(func.count()).select_from(Session)).one())


def test_a_retry_with_the_key_gets_the_first_answer_and_makes_no_second_session(api: Any, any_engine: Engine) -> None:
    first = create(api, {"prompt": "fix the login test", "weight": 1.0, "title": "login"})
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers, first.text
    # The same request, its keys in another order and a default left out, and the draft's quoted form of the key.
    retries = (create(api, {"title": "login", "prompt": "fix the login test"}),
               create(api, {"prompt": "fix the login test", "title": "login"}, key=f'"{KEY}"'))
    for again in retries:
        assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true", again.text
        assert again.json() == first.json()
    assert sessions(any_engine) == 1 and [r.prompt for r in api.workers.submitted] == ["fix the login test"]


def test_the_same_key_with_another_body_is_a_409_naming_the_header(api: Any, any_engine: Engine) -> None:
    first = create(api, {"prompt": "fix the login test"})
    assert first.status_code == 201
    other = create(api, {"prompt": "fix the logout test"})
    assert other.status_code == 409 and other.json()["field"] == "Idempotency-Key", other.text
    message = other.json()["message"]
    assert (
        f"'{KEY}' was sent at 2026-11-02 09:00 UTC with another request body (it made session "
        f"#{first.json()['session']['id']})"
        in message
    )
    assert "send that body again, or a new key for a new request" in message
    assert sessions(any_engine) == 1


def test_a_key_is_its_callers_own_and_no_key_is_no_promise(api: Any, any_engine: Engine) -> None:
    ids = {create(api, {"prompt": "p"}, actor=actor).json()["session"]["id"] for actor in (None, "alice", "bob")}
    assert len(ids) == 3
    assert (
        create(api, {"prompt": "p"}, key=None).status_code == create(api, {"prompt": "p"}, key=None).status_code == 201
    )
    assert sessions(any_engine) == 5


@pytest.mark.parametrize("key", ["", "a" * 256, "has space", "é", "a,b", '"open', '""', "x\"y"])
def test_a_key_past_the_rule_is_a_422_naming_the_header_and_makes_nothing(
    api: Any, any_engine: Engine, key: str
) -> None:
    refused = create(api, {"prompt": "p"}, key=key)
    assert refused.status_code == 422 and refused.json()["field"] == "Idempotency-Key", refused.text
    assert sessions(any_engine) == 0
    assert create(api, {"prompt": "p"}, key="a" * 255).status_code == 201


def test_a_refused_request_keeps_nothing_so_the_corrected_one_runs(api: Any, any_engine: Engine) -> None:
    refused = create(api, {"prompt": "p", "runtime": "no-such-runtime"})
    assert refused.status_code == 422 and refused.json()["field"] == "runtime", refused.text
    assert create(api, {"prompt": "p"}).status_code == 201
    assert sessions(any_engine) == 1


def test_a_key_is_kept_24_hours_and_is_new_after(api: Any, any_engine: Engine, clock: Any) -> None:
    first = create(api, {"prompt": "p"}).json()["session"]["id"]
    clock.advance(KEPT - timedelta(seconds=1))
    assert create(api, {"prompt": "p"}).json()["session"]["id"] == first
    clock.advance(timedelta(seconds=1))
    assert create(api, {"prompt": "p"}).json()["session"]["id"] != first
    with DBSession(any_engine) as db:  # the expired row went, so the table holds a day of keys at most
        assert db.exec(select(func.count()).select_from(IdempotencyKey)).one() == 1
    assert sessions(any_engine) == 2


def test_retries_sent_at_once_make_one_session(api: Any, any_engine: Engine) -> None:
    answers: list[httpx.Response] = []
    start = threading.Barrier(8)

    def send() -> None:
        with httpx.Client(base_url=api.server.url, timeout=30) as client:
            start.wait()
            answers.append(client.post("/api/v1/sessions", json={"prompt": "once"},
                                       headers={"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": KEY}))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted({a.status_code for a in answers} - {201, 409}) == [] and len(answers) == 8, [a.text for a in answers]
    made = {a.json()["session"]["id"] for a in answers if a.status_code == 201}
    assert len(made) == 1 and sessions(any_engine) == 1
    assert all("has not been answered yet" in a.json()["message"] for a in answers if a.status_code == 409)


def test_a_key_whose_answer_was_lost_to_a_crash_names_the_session_it_made(
    api: Any, any_engine: Engine, clock: Any
) -> None:
    # What a kill -9 between the session's commit and its answer leaves: the key, its session, no answer.
    session_id = create(api, {"prompt": "p"}, key=None).json()["session"]["id"]
    with session_scope(any_engine) as db:
        db.add(
            IdempotencyKey(
                caller="api token",
                key="lost",
                fingerprint=_fingerprint({"prompt": "p"}),
                session_id=session_id,
                created_at=clock.now(),
            )
        )
    answer = create(api, {"prompt": "p"}, key="lost")
    assert answer.status_code == 409 and f"made session #{session_id}" in answer.json()["message"], answer.text
    assert f"GET /api/v1/sessions/{session_id}" in answer.json()["message"]
    assert sessions(any_engine) == 1


def _fingerprint(body: dict[str, Any]) -> str:
    from bot.api.idempotency import fingerprint
    from bot.api.models import SessionCreate

    return fingerprint(SessionCreate.model_validate(body))
