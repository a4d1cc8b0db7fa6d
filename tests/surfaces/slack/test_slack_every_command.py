"""Every `/pacer` subcommand as a signed HTTP request into the real Bolt app, answered at the
response_url of a loopback mock of Slack's Web API: one that works, one with a bad argument (one
line + the usage, nothing changed) and, where a role gates it, one denied (nothing changed)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from sqlalchemy import Engine

from scheduler.store.db import session_scope
from scheduler.store.models import OperatorHold, QueueHold, Trigger
from scheduler.store.sessions import NewSession, create_session
from tests.support.slack_mock import MockSlack, serving
from tests.surfaces.chat.test_chat import state

_names = itertools.count()

# (command, works as, a bad argument, denied to (actor) or None when the command is open)
CASES: list[tuple[str, str, str, str | None]] = [
    ("help", "UMEM", "help nosuchthing", None),
    ("queue spot", "UMEM", "queue sideways", "USTRANGER"),
    ("holds", "UMEM", "holds everything now", "USTRANGER"),
    ("why {sid}", "UMEM", "why soon", "USTRANGER"),
    ("promote {sid}", "UOPS", "promote", "UMEM"),
    ("demote {sid} top", "UOPS", "demote {sid} bottom", "UMEM"),
    ("rank {sid} 40", "UOPS", "rank {sid} high", "UMEM"),
    ("start {sid}", "UOPS", "start", "UMEM"),
    ("pause {sid} until 2h", "UOPS", "pause {sid} until never", "UMEM"),
    ("archive {sid}", "UOPS", "archive x", "UMEM"),
    ("stop {sid}", "UOPS", "stop x", "UMEM"),
    ("hold #{sid} for 1h checking the deploy", "UOPS", "hold", "USTRANGER"),
    ("release {hold}", "UOPS", "release x", "UMEM"),
    ("resume", "UOPS", "resume a b c", "UMEM"),
    ("policy", "UMEM", "policy sideways", "USTRANGER"),
    ("policy set max_sessions=4", "UOPS", "policy set max_sessions=0", "UMEM"),
    ("trigger {tid} class priority", "UOPS", "trigger {tid} class urgent", "UMEM"),
    ("trigger {tid} precedence 70", "UOPS", "trigger {tid} precedence high", "UMEM"),
    ("new --spot tidy the docs", "UMEM", "new", "USTRANGER"),
    ("whatif {sid}", "UMEM", "whatif later", "USTRANGER"),
    ("reply {sid} please also check the logout path", "UMEM", "reply", "USTRANGER"),
]


def _setup(pacer: Any) -> dict[str, int]:
    now = pacer.clock.now()
    with session_scope(pacer.engine) as db:
        session = create_session(
            db, NewSession(title="the operator's", genesis="github_label", requester="UOPS"), now=now
        )
        trigger = Trigger(name="labels", kind="github_label", created_at=now, config={"label": "pacer"})
        db.add(trigger)
        hold = OperatorHold(selector_kind="genesis", selector_value="schedule", armer="UOPS", created_at=now)
        db.add(hold)
        db.add(QueueHold(reason="credits", sentence="The API key has no credit left.", since=now))
        db.flush()
        return {"sid": session.id or 0, "tid": trigger.id or 0, "hold": hold.id or 0}


def _ask(slack: Any, mock: MockSlack, text: str, user: str) -> str:
    name = f"c{next(_names)}"
    ack = slack.command(text, user=user, name=name)
    assert ack.status_code == 200 and ack.text == ""
    (answer,) = mock.wait_for_method(f"/response/{name}", timeout=10)
    return str(answer.body["text"])


@pytest.mark.parametrize(
    ("command", "actor", "bad", "denied"), CASES, ids=[c[0].split()[0] + ":" + c[0] for c in CASES]
)
def test_every_subcommand_over_signed_http(
    engine: Engine, clock, deferrer, mock: MockSlack, command, actor, bad, denied
) -> None:
    with serving(engine, clock, deferrer, mock) as slack:
        ids = _setup(slack.pacer)
        before = state(slack.pacer)
        wrong = _ask(slack, mock, bad.format(**ids), actor)
        assert "usage" in wrong.lower(), wrong
        assert state(slack.pacer) == before, f"{bad!r} changed something"
        if denied is not None:
            refused = _ask(slack, mock, command.format(**ids), denied)
            assert "role" in refused or "roster" in refused, refused
            assert state(slack.pacer) == before, f"{command!r} as {denied} changed something"
        answer = _ask(slack, mock, command.format(**ids), actor)
        assert "usage:" not in answer and "needs the" not in answer, answer
        slack.settle()
