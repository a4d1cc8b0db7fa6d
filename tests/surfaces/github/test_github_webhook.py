"""POST /github/webhook at the door and behind it: signatures, sizes, malformed bodies, every
vendored example payload, redeliveries, and the work done after the answer.

Requests go through Pacer's real FastAPI app (create_app) with the real intake and turn engine
in virtual time; nothing of Pacer's is mocked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DBSession
from sqlmodel import func, select

from bot.github.intake import INTAKE_HOOK_ID
from bot.github.webhook import is_signed, signature
from bot.serve.app import create_app
from scheduler.store.models import Session, Trigger, Turn, WebhookDelivery
from tests.support.github_support import (
    SECRET,
    example_payloads,
    headers,
    issue_payload,
    make_pacer,
    serving,
)


class Hook:
    """Pacer's app under a test client, and the edge whose after-answer work a test waits for."""

    def __init__(self, client: httpx.Client, pacer: Any, app: Any) -> None:
        self.client = client
        self.pacer = pacer
        self.edge = app.state.github

    def send(
        self, event: str, payload: Any, *, delivery: str | None = None, secret: str = SECRET, hook_id: str = "1"
    ) -> Any:
        body = json.dumps(payload).encode()
        response = self.client.post(
            "/github/webhook",
            content=body,
            headers=headers(event, body, secret=secret, delivery=delivery, hook_id=hook_id),
        )
        assert self.edge.drain(10)
        return response

    def count(self, model: Any) -> int:
        with DBSession(self.pacer.engine) as db:
            return int(db.exec(select(func.count()).select_from(model)).one())

    def deliveries(self) -> list[tuple[str, str]]:
        """(hook id, delivery id) of GitHub's deliveries taken, apart from Pacer's intake keys."""
        with DBSession(self.pacer.engine) as db:
            rows = db.exec(
                select(WebhookDelivery).where(WebhookDelivery.hook_id != INTAKE_HOOK_ID).order_by(WebhookDelivery.id)
            )
            return [(r.hook_id, r.delivery_id) for r in rows]

    def sessions(self) -> list[Session]:
        with DBSession(self.pacer.engine) as db:
            return list(db.exec(select(Session).order_by(Session.id)).all())


def _trigger(engine: Engine, clock: Any, **fields: Any) -> None:
    with DBSession(engine) as db:
        db.add(Trigger(created_at=clock.now(), **fields))
        db.commit()


@pytest.fixture
def hook(engine: Engine, clock: Any, deferrer: Any) -> Iterator[Hook]:
    pacer = make_pacer(engine, clock, deferrer)
    _trigger(
        engine,
        clock,
        name="issues",
        kind="github_issue",
        prompt_template="Fix {{ repository }}#{{ number }}: {{ title }}\n\n{{ body }}",
    )
    _trigger(engine, clock, name="label", kind="github_label", config={"label": "bug"}, prompt_template="{{ text }}")
    app = create_app(pacer, start_scheduler=False)
    with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield Hook(client, pacer, app)


def test_githubs_published_test_vector() -> None:
    secret, body = b"It's a Secret to Everybody", b"Hello, World!"
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert signature(secret, body) == expected
    assert is_signed(secret, expected, body)


@pytest.mark.parametrize(
    "header, body",
    [
        (None, b"Hello, World!"),
        ("", b"Hello, World!"),
        ("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", b"Hello, World?"),
        ("sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", b"Hello, World!"),
        ("757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", b"Hello, World!"),
        ("sha256=\u00e9\u00e9", b"Hello, World!"),
    ],
)
def test_a_missing_or_wrong_signature_does_not_verify(header: str | None, body: bytes) -> None:
    assert not is_signed(b"It's a Secret to Everybody", header, body)


@pytest.mark.parametrize("event, path", example_payloads(), ids=lambda v: v.name if isinstance(v, Path) else v)
def test_every_example_payload_is_answered_2xx_signed_and_401_unsigned(hook: Hook, event: str, path: Path) -> None:
    body = path.read_bytes()
    signed = hook.client.post("/github/webhook", content=body, headers=headers(event, body))
    assert 200 <= signed.status_code < 300, signed.text
    assert "message" in signed.json()
    unsigned = headers(event, body)
    del unsigned["X-Hub-Signature-256"]
    assert hook.client.post("/github/webhook", content=body, headers=unsigned).status_code == 401
    wrong = headers(event, body, secret="not the secret")
    assert hook.client.post("/github/webhook", content=body, headers=wrong).status_code == 401
    assert hook.edge.drain(10)


def test_the_examples_start_work_only_where_a_trigger_matches(hook: Hook) -> None:
    for event, path in example_payloads():
        body = path.read_bytes()
        hook.client.post("/github/webhook", content=body, headers=headers(event, body))
    assert hook.edge.drain(10)
    titles = sorted((s.genesis, s.title) for s in hook.sessions())
    # issues.opened (three files, one issue: one session), issues.labeled "bug", pull_request.labeled "bug".
    assert titles == [
        ("github_issue", "Codertocat/Hello-World#1 Spelling error in the README file"),
        ("github_label", "Codertocat/Hello-World#1 Spelling error in the README file"),
        ("github_label", "Codertocat/Hello-World#2 Update the README with new information."),
    ]
    # Each first turn went through submit_turn after the answer; one repository is one
    # concurrency group, so one runs and the others wait their turn with the reason recorded.
    # issues.unlabeled "bug" then stops #1's label session (archived, its running turn halted), and the
    # queue pass its end asks for starts the next in its place.
    asked = sorted((s.genesis, s.status, s.hold_reason) for s in hook.sessions())
    assert asked == [
        ("github_issue", "running", None),
        ("github_label", "archived", None),
        ("github_label", "waiting", "concurrency_group"),
    ]


def test_an_opened_issue_becomes_a_session_with_the_rendered_prompt(hook: Hook) -> None:
    response = hook.send("issues", issue_payload(body="depends on #3\n\nAnd @#4 too."))
    assert response.status_code == 202
    (session,) = hook.sessions()
    assert response.json()["sessions"] == [session.id]
    assert session.genesis == "github_issue"
    assert session.prompt == "Fix octo/app#7: The thing is broken\n\ndepends on #3\n\nAnd @#4 too."
    assert session.concurrency_group == "repo:octo/app"
    assert session.source["issue_key"] == "octo/app#7" and session.source["author"] == "alice"
    assert session.status == "running"  # the first turn was admitted after the answer


def test_a_redelivery_answers_200_and_creates_nothing(hook: Hook) -> None:
    payload = issue_payload()
    assert hook.send("issues", payload, delivery="guid-1").status_code == 202
    again = hook.send("issues", payload, delivery="guid-1")
    assert again.status_code == 200
    assert "already taken" in again.json()["message"]
    assert hook.count(Session) == 1 and hook.deliveries() == [("1", "guid-1")] and hook.count(Turn) == 1


def test_the_same_event_under_a_new_guid_or_another_hook_still_makes_one_session(hook: Hook) -> None:
    payload = issue_payload()
    assert hook.send("issues", payload, delivery="guid-1", hook_id="1").status_code == 202
    assert hook.send("issues", payload, delivery="guid-1", hook_id="2").status_code == 202
    assert hook.send("issues", payload, delivery="guid-2", hook_id="1").status_code == 202
    assert hook.count(Session) == 1
    assert hook.deliveries() == [("1", "guid-1"), ("2", "guid-1"), ("1", "guid-2")]


def test_an_untrusted_author_is_ignored_with_a_log_line(hook: Hook, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="pacer.intake")
    response = hook.send("issues", issue_payload(author="mallory", association="CONTRIBUTOR"))
    assert response.status_code == 202
    assert response.json()["sessions"] == []
    assert hook.count(Session) == 0
    assert "by mallory (CONTRIBUTOR) ignored" in caplog.text


def test_a_label_by_a_collaborator_on_a_strangers_issue_starts_work(hook: Hook) -> None:
    payload = issue_payload(
        "labeled", author="stranger", association="NONE", sender="maintainer", label="bug", labels=("bug",)
    )
    assert hook.send("issues", payload).json()["sessions"] != []


def test_a_strangers_label_on_their_own_issue_starts_nothing(hook: Hook) -> None:
    payload = issue_payload("labeled", author="stranger", association="NONE", label="bug", labels=("bug",))
    assert hook.send("issues", payload).json()["sessions"] == []


@pytest.mark.parametrize(
    "association, starts",
    [
        ("OWNER", True),
        ("MEMBER", True),
        ("COLLABORATOR", True),
        ("CONTRIBUTOR", False),
        ("FIRST_TIME_CONTRIBUTOR", False),
        ("FIRST_TIMER", False),
        ("MANNEQUIN", False),
        ("NONE", False),
        ("", False),
    ],
)
def test_only_write_access_starts_work_from_an_issue_or_a_pull_request(
    hook: Hook, association: str, starts: bool
) -> None:
    opened = issue_payload(author="someone", association=association)
    labelled_own_pr = issue_payload(
        "labeled", number=8, author="someone", association=association, label="bug", labels=("bug",), pull_request=True
    )
    assert bool(hook.send("issues", opened).json()["sessions"]) is starts
    assert bool(hook.send("pull_request", labelled_own_pr).json()["sessions"]) is starts
    assert hook.count(Session) == (2 if starts else 0)


def test_a_priority_label_a_workflow_bot_adds_changes_nothing(hook: Hook) -> None:
    # A workflow acts with the rights of whoever triggered it, so its label is nobody's.
    [session_id] = hook.send("issues", issue_payload()).json()["sessions"]
    by_bot = issue_payload(
        "labeled", sender="github-actions[bot]", sender_type="Bot", label="pacer:priority", labels=("pacer:priority",)
    )
    assert hook.send("issues", by_bot).status_code == 202
    [session] = hook.sessions()
    assert (session.id, session.scheduling_class) == (session_id, None)
    by_maintainer = issue_payload("labeled", sender="maintainer", label="pacer:priority", labels=("pacer:priority",))
    assert hook.send("issues", by_maintainer).status_code == 202
    assert hook.sessions()[0].scheduling_class == "priority"


def test_pacers_own_events_are_ignored(hook: Hook) -> None:
    payload = issue_payload("labeled", sender="pacer[bot]", sender_type="Bot", label="bug")
    response = hook.send("issues", payload)
    assert response.status_code == 200
    assert "Pacer itself" in response.json()["message"]
    assert hook.count(Session) == 0 and hook.count(WebhookDelivery) == 0


@pytest.mark.parametrize(
    "event, payload",
    [
        ("push", {"ref": "refs/heads/main", "sender": {"login": "alice"}}),
        ("issues", issue_payload("assigned")),
        ("issues", issue_payload("unlabeled", label="pacer:priority")),
        ("pull_request", issue_payload("synchronize", pull_request=True)),
        ("issues", {"action": "opened", "issue": "not an object"}),
        ("issues", {"action": "opened", "issue": {"number": "7"}, "repository": {"full_name": "a/b"}}),
        ("", {"zen": "no event header"}),
    ],
)
def test_unknown_events_and_actions_are_answered_200_and_change_nothing(hook: Hook, event: str, payload: Any) -> None:
    response = hook.send(event, payload)
    assert response.status_code == 200
    assert response.json()["message"].startswith("Ignored:")
    assert hook.count(Session) == 0 and hook.count(WebhookDelivery) == 0


def test_ping_is_answered(hook: Hook) -> None:
    response = hook.send("ping", {"zen": "Keep it logically awesome.", "hook_id": 1})
    assert response.status_code == 200
    assert response.json()["message"].startswith("pong")


@pytest.mark.parametrize(
    "body, problem",
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "a JSON list, not an object"),
        (b"\xff\xfe\xfa", "not JSON"),
        (b"[" * 50000 + b"]" * 50000, "not JSON"),
    ],
)
def test_a_signed_body_that_is_not_a_json_object_is_400(hook: Hook, body: bytes, problem: str) -> None:
    response = hook.client.post("/github/webhook", content=body, headers=headers("issues", body))
    assert response.status_code == 400
    assert problem in response.json()["message"]


def test_a_form_encoded_delivery_is_read_from_its_payload_field(hook: Hook) -> None:
    from urllib.parse import urlencode

    body = urlencode({"payload": json.dumps(issue_payload())}).encode()
    sent = headers("issues", body)
    sent["Content-Type"] = "application/x-www-form-urlencoded"
    assert hook.client.post("/github/webhook", content=body, headers=sent).status_code == 202
    assert hook.edge.drain(10)
    assert hook.count(Session) == 1


def test_an_actionable_event_without_a_delivery_id_is_400(hook: Hook) -> None:
    body = json.dumps(issue_payload()).encode()
    sent = headers("issues", body)
    del sent["X-GitHub-Delivery"]
    response = hook.client.post("/github/webhook", content=body, headers=sent)
    assert response.status_code == 400
    assert hook.count(Session) == 0


def test_a_body_over_the_limit_is_413_by_its_declared_length(hook: Hook) -> None:
    body = json.dumps(issue_payload(body="x" * 140_000)).encode()
    response = hook.client.post("/github/webhook", content=body, headers=headers("issues", body))
    assert response.status_code == 413
    assert "131072 bytes" in response.json()["message"]
    assert hook.count(Session) == 0


def test_a_body_over_the_limit_is_413_by_the_bytes_read_when_no_length_is_declared(hook: Hook) -> None:
    body = json.dumps(issue_payload(body="x" * 140_000)).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 16384):
            yield body[start : start + 16384]

    response = hook.client.post("/github/webhook", content=chunks(), headers=headers("issues", body))
    assert response.status_code == 413
    assert hook.count(Session) == 0


def test_without_a_secret_the_route_answers_503_and_says_why(engine: Engine, clock: Any, deferrer: Any) -> None:
    pacer = make_pacer(engine, clock, deferrer, GITHUB_WEBHOOK_SECRET="")
    with serving(create_app(pacer, start_scheduler=False)) as url, httpx.Client(base_url=url, timeout=10) as client:
        body = json.dumps(issue_payload()).encode()
        response = client.post("/github/webhook", content=body, headers=headers("issues", body))
    assert response.status_code == 503
    assert "GITHUB_WEBHOOK_SECRET" in response.json()["message"]
