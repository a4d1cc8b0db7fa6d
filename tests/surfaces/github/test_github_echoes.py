"""Retries and echoes make no work on GitHub, through signed deliveries into Pacer's real app, on
SQLite and PostgreSQL:

    one comment, many deliveries   a comment is taken once by its id, whatever its delivery and
                                   hook ids: one message, one `/pacer` answer, one hold
    an edited comment              is not a new message (Pacer acts on `created` only)
    Pacer's own comments           its status comment and its `/pacer` replies begin with its
                                   marker, and are Pacer's whoever posted them: with a personal
                                   access token they arrive as that person's, and the default
                                   GITHUB_BOT_LOGIN does not know them
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DBSession
from sqlmodel import col, func, select

from bot.serve.app import create_app
from integrations.github import markers
from scheduler.store.db import session_scope
from scheduler.store.models import HumanMessage, OperatorHold, Session, Trigger
from tests.support.github_support import FakeGithub, comment_payload, headers, issue_payload, make_pacer, serving


class Hook:
    def __init__(self, client: httpx.Client, app: Any, engine: Engine, fake: FakeGithub) -> None:
        self.client, self.app, self.engine, self.fake = client, app, engine, fake

    def send(
        self, event: str, payload: dict[str, Any], *, delivery: str | None = None, hook_id: str = "1"
    ) -> httpx.Response:
        body = json.dumps(payload).encode()
        answer = self.client.post(
            "/github/webhook", content=body, headers=headers(event, body, delivery=delivery, hook_id=hook_id)
        )
        assert answer.status_code < 300, answer.text
        self.settle()
        return answer

    def settle(self) -> None:
        assert self.app.state.github.drain(10)
        assert self.app.state.pacer.extras["github_status"].drain(10)

    def messages(self) -> list[tuple[int, str]]:
        with DBSession(self.engine) as db:
            return [(m.session_id, m.text) for m in db.exec(select(HumanMessage).order_by(col(HumanMessage.id)))]

    def count(self, model: Any) -> int:
        with DBSession(self.engine) as db:
            return int(db.exec(select(func.count()).select_from(model)).one())


@pytest.fixture
def hook(any_engine: Engine, clock: Any, deferrer: Any) -> Iterator[Hook]:
    fake = FakeGithub().start()
    # A personal access token, and GITHUB_BOT_LOGIN left at its default: Pacer posts as alice.
    pacer = make_pacer(any_engine, clock, deferrer, GITHUB_TOKEN="ghp_alices_token", GITHUB_API_URL=fake.url + "/")
    with session_scope(any_engine) as db:
        db.add(Trigger(name="issues", kind="github_issue", prompt_template="{{ title }}", created_at=clock.now()))
    app = create_app(pacer, start_scheduler=False)
    try:
        with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
            yield Hook(client, app, any_engine, fake)
    finally:
        fake.stop()


def _session(hook: Hook) -> int:
    answer = hook.send("issues", issue_payload(author="alice", association="OWNER"))
    (session_id,) = answer.json()["sessions"]
    return int(session_id)


def test_one_comment_under_seven_delivery_ids_is_one_message(hook: Hook) -> None:
    session_id = _session(hook)
    comment = comment_payload("Please also cover the error path.", commenter="bob", association="COLLABORATOR")
    for n in range(7):  # seven delivery ids, across two hooks (a repository webhook and an App's)
        hook.send("issue_comment", comment, hook_id=str(1 + n % 2))
    assert hook.messages() == [(session_id, "Please also cover the error path.")]
    hook.send("issue_comment", comment_payload("And the timeout path.", commenter="bob", association="COLLABORATOR"))
    assert hook.messages() == [(session_id, "Please also cover the error path."), (session_id, "And the timeout path.")]


def test_one_comment_delivered_at_once_many_times_is_one_message(hook: Hook) -> None:
    session_id = _session(hook)
    body = json.dumps(comment_payload("Once, please.", commenter="bob", association="MEMBER")).encode()
    start = threading.Barrier(6)
    answers: list[int] = []

    def send(n: int) -> None:
        with httpx.Client(base_url=str(hook.client.base_url), timeout=30) as client:
            start.wait()
            answers.append(
                client.post(
                    "/github/webhook", content=body, headers=headers("issue_comment", body, hook_id=str(n))
                ).status_code
            )

    threads = [threading.Thread(target=send, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    hook.settle()
    assert sorted(answers) == [202] * 6
    assert hook.messages() == [(session_id, "Once, please.")]


def test_a_hold_and_a_command_in_a_comment_delivered_twice_act_once(hook: Hook) -> None:
    session_id = _session(hook)
    hold = comment_payload("/hold", commenter="bob", association="MEMBER")
    command = comment_payload("/pacer queue", commenter="bob", association="MEMBER")
    for payload in (hold, hold, command, command):
        hook.send("issue_comment", payload)
    with DBSession(hook.engine) as db:
        assert [(h.selector_value, h.released_at) for h in db.exec(select(OperatorHold))] == [(str(session_id), None)]
    replies = [c["body"] for c in hook.fake.comments.values() if c["body"].startswith(markers.REPLY)]
    assert len(replies) == 1 and "@bob `/pacer queue`" in replies[0]


def test_an_edited_comment_is_not_a_new_message(hook: Hook) -> None:
    session_id = _session(hook)
    comment = comment_payload("Cover the error path.", commenter="bob", association="MEMBER")
    hook.send("issue_comment", comment)
    edited = {
        **comment,
        "action": "edited",
        "comment": {**comment["comment"], "body": "Cover the error path and the timeout."},
        "changes": {"body": {"from": "Cover the error path."}},
    }
    answer = hook.send("issue_comment", edited)
    assert answer.status_code == 200 and "issue_comment.edited starts nothing" in answer.json()["message"]
    assert hook.messages() == [(session_id, "Cover the error path.")]


def test_pacers_own_status_comment_and_replies_posted_with_a_token_are_not_turns(hook: Hook) -> None:
    session_id = _session(hook)
    hook.send("issue_comment", comment_payload("/pacer queue", commenter="bob", association="MEMBER"))
    written = [c["body"] for c in hook.fake.comments.values()]
    status = [body for body in written if body.startswith(markers.STATUS)]
    replies = [body for body in written if body.startswith(markers.REPLY)]
    assert len(status) == 1 and len(replies) == 1, written
    # GitHub sends each back as issue_comment.created by the token's owner, an OWNER of the repository.
    for body in [*status, *replies]:
        answer = hook.send("issue_comment", comment_payload(body, commenter="alice", association="OWNER"))
        assert answer.status_code == 200 and "is Pacer's own comment" in answer.json()["message"], answer.text
    assert hook.messages() == []
    assert (
        len([c for c in hook.fake.comments.values() if c["body"].startswith(markers.REPLY)]) == 1
    )  # no reply to a reply
    with DBSession(hook.engine) as db:
        assert db.get(Session, session_id) is not None
