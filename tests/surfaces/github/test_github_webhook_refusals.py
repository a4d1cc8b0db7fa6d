"""A refused GitHub delivery says why: every 4xx and 5xx of POST /github/webhook carries an
`error` code and a sentence naming what was wrong and what to change, so GitHub's "Recent
Deliveries" page tells the person setting up the hook what to fix. Served by Pacer's real app
over loopback HTTP, on a real SQLite file; nothing is created by a refused delivery."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DBSession
from sqlmodel import func, select

from bot.serve.app import create_app
from scheduler.store.models import Session
from tests.support.github_support import SECRET, headers, issue_payload, make_pacer, serving

BODY = json.dumps(issue_payload()).encode()


@pytest.fixture
def client(engine: Engine, clock: Any, deferrer: Any) -> Iterator[httpx.Client]:
    pacer = make_pacer(engine, clock, deferrer, PACER_MAX_BODY_BYTES="4096")
    with serving(create_app(pacer, start_scheduler=False)) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client
    with DBSession(engine) as db:
        assert db.exec(select(func.count()).select_from(Session)).one() == 0


def _signed(event: str = "issues", body: bytes = BODY, **changed: str | None) -> dict[str, str]:
    sent = headers(event, body)
    for name, value in changed.items():
        sent.pop(name.replace("_", "-"), None)
        if value is not None:
            sent[name.replace("_", "-")] = value
    return sent


@pytest.mark.parametrize(
    ("body", "sent", "status", "error", "says"),
    [
        (BODY, _signed(**{"X_Hub_Signature_256": None}), 401, "unsigned", "X-Hub-Signature-256 is missing"),
        (BODY, _signed(**{"X_Hub_Signature_256": "sha1=0123"}), 401, "bad_signature", "does not start with sha256="),
        (BODY, headers("issues", BODY, secret=SECRET + "x"), 401, "bad_signature", "secret in GitHub differs"),
        (b"{not json", headers("issues", b"{not json"), 400, "malformed", "not JSON: Expecting property name"),
        (b"[1, 2]", headers("issues", b"[1, 2]"), 400, "malformed", "a JSON list, not an object"),
        (b'"text"', headers("issues", b'"text"'), 400, "malformed", "a JSON string, not an object"),
        (b"other=1", {**headers("issues", b"other=1"), "Content-Type": "application/x-www-form-urlencoded"},
         400, "malformed", "without its payload field"),
        (BODY, _signed(X_GitHub_Delivery=None), 400, "no_delivery", "X-GitHub-Delivery is missing"),
        (b"x" * 5000, headers("issues", b"x" * 5000), 413, "too_large", "larger than 4096 bytes"),
    ],
    ids=["unsigned", "sha1", "wrong-secret", "not-json", "list", "string", "form-without-payload",
         "no-delivery", "too-large"],
)
def test_each_refusal_names_its_cause(client: httpx.Client, body: bytes, sent: dict[str, str], status: int,
                                      error: str, says: str) -> None:
    response = client.post("/github/webhook", content=body, headers=sent)
    assert response.status_code == status, response.text
    answer = response.json()
    assert answer["error"] == error and says in answer["message"], answer


def test_a_method_other_than_post_says_what_the_url_is(client: httpx.Client) -> None:
    response = client.get("/github/webhook")
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert response.json()["error"] == "method_not_allowed"
    assert "takes POST deliveries signed with GITHUB_WEBHOOK_SECRET" in response.json()["message"]


def test_an_unknown_event_is_answered_2xx_saying_it_starts_nothing(client: httpx.Client) -> None:
    # GitHub's advice: acknowledge what you do not act on, or it reports the hook as failing.
    response = client.post("/github/webhook", content=b"{}", headers=headers("watch", b"{}"))
    assert response.status_code == 200 and "error" not in response.json()
    assert response.json()["message"].startswith("Ignored:") and "watch" in response.json()["message"]
