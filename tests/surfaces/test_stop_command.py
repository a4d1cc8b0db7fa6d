"""`/pacer stop <id>` and `POST /api/v1/sessions/{id}/stop` (P19 item 2): any session, running or
not, is stopped — its running turn halted where it stands and the session archived — and says so:
the answer says whether a turn was halted, and the session's Slack thread is told who stopped it.
Bad input (no id, a word, an id no session has, a session already ended) gets its own sentence
and changes nothing. Each surface is driven for real: signed `/pacer` into the Bolt app with the
loopback Slack mock, the REST app over HTTP, a signed `issue_comment` into the webhook."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlmodel import col, select

from bot.serve.app import create_app
from integrations.github import markers
from integrations.slack.notifier import thread_source
from scheduler.engine.turns import submit_turn
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Turn
from scheduler.store.sessions import NewSession, create_session
from tests.support.api_client import make_api
from tests.support.github_support import FakeGithub, comment_payload, headers, make_pacer, serving
from tests.support.slack_mock import MockSlack
from tests.support.slack_mock import serving as slack_serving
from tests.surfaces.chat.test_chat import state

_names = itertools.count()
UNKNOWN = 424242


def _running(pacer: Any, requester: str = "UOPS", **fields: Any) -> int:
    """A session whose first turn runs on the virtual workers."""
    with session_scope(pacer.engine) as db:
        row = create_session(db, NewSession(title="Fix the flaky test", genesis="slack", requester=requester, **fields),
                             now=pacer.clock.now())
        session_id = row.id or 0
    assert submit_turn(pacer.ctx, session_id, "fix it").outcome == "started"
    return session_id


def _row(pacer: Any, session_id: int) -> tuple[Session, list[str]]:
    with session_scope(pacer.engine) as db:
        session = db.get(Session, session_id)
        assert session is not None
        turns = [t.status for t in db.exec(select(Turn).where(Turn.session_id == session_id).order_by(col(Turn.id)))]
        db.expunge(session)
        return session, turns


def _ask(slack: Any, mock: MockSlack, text: str, user: str = "UOPS") -> str:
    name = f"s{next(_names)}"
    ack = slack.command(text, user=user, name=name)
    assert ack.status_code == 200 and ack.text == ""
    (answer,) = mock.wait_for_method(f"/response/{name}", timeout=10)
    return str(answer.body["text"])


def test_pacer_stop_in_slack_halts_the_running_turn_and_tells_the_thread(
    engine: Engine, clock: Any, deferrer: Any, mock: MockSlack
) -> None:
    with slack_serving(engine, clock, deferrer, mock) as slack:
        pacer = slack.pacer
        thread = {"channel": "C0WORK", "ts": "1790000000.000100", "user": "UMEM", "channel_type": "channel"}
        sid = _running(pacer, source={"slack": thread_source(thread)})
        answer = _ask(slack, mock, f"stop {sid}")
        assert answer.endswith(
            "is stopped: its running turn was halted, and it is archived and will not run again."
        ), answer
        session, turns = _row(pacer, sid)
        assert (session.status, turns) == ("archived", ["halted"])
        assert session.source["stopped"] == {"by": "UOPS", "why": "stop", "label": None, "halted": True}
        (told,) = mock.wait_for(
            lambda calls: [c for c in calls if c.method == "chat.postMessage" and "Stopped" in c.body.get("text", "")]
        )
        assert told.body["thread_ts"] == "1790000000.000100"
        said = told.body["text"]
        assert said.endswith("was archived; it will not run. Stopped by UOPS; its running turn was halted."), said

        # Stopping it again, or a session that is not there, or no id at all: a sentence each, nothing changed.
        before = state(pacer)
        usage = "\nusage: `/pacer stop &lt;id&gt;`"
        assert _ask(slack, mock, f"stop {sid}") == f":warning: session #{sid} is already archived{usage}"
        assert _ask(slack, mock, f"stop {UNKNOWN}") == f":warning: session #{UNKNOWN} does not exist{usage}"
        assert _ask(slack, mock, "stop") == f":warning: missing session &lt;id&gt;{usage}"
        not_an_id = "id: 'nine' is not an id; use a number like 42 or #42"
        assert _ask(slack, mock, "stop nine") == f":warning: {not_an_id}{usage}"
        assert state(pacer) == before


def test_pacer_stop_of_a_waiting_session_says_no_turn_was_running(
    engine: Engine, clock: Any, deferrer: Any, mock: MockSlack
) -> None:
    with slack_serving(engine, clock, deferrer, mock) as slack:
        with session_scope(slack.pacer.engine) as db:
            sid = create_session(db, NewSession(title="Later", genesis="api", requester="UMEM"), now=clock.now()).id
        denied = _ask(slack, mock, f"stop {sid}", user="USTRANGER")
        assert "stop" in denied and _row(slack.pacer, sid or 0)[0].status == "waiting"
        answer = _ask(slack, mock, f"stop {sid}", user="UMEM")  # a member stops the sessions they asked for
        assert answer.endswith("is stopped: no turn was running; it is archived and will not run again."), answer
        assert _row(slack.pacer, sid or 0)[0].source["stopped"]["halted"] is False


def test_the_rest_stop_halts_and_refuses_what_it_cannot_stop(engine: Engine, clock: Any) -> None:
    api = make_api(engine, clock)
    try:
        sid = _running(api.pacer, requester="api token")
        stopped = api.post(f"/sessions/{sid}/stop")
        assert stopped.status_code == 200, stopped.text
        body = stopped.json()
        assert (body["halted"], body["previous_status"], body["session"]["status"]) == (True, "running", "archived")
        stop_record = {"by": "api token", "why": "stop", "label": None, "halted": True}
        assert body["session"]["stopped"] == stop_record
        assert api.get(f"/sessions/{sid}").json()["stopped"] == stop_record  # it shows as stopped, and how
        assert _row(api.pacer, sid)[1] == ["halted"]
        before = state(api.pacer)
        again = api.post(f"/sessions/{sid}/stop")
        assert again.status_code == 409 and f"session #{sid} is already archived" in again.text
        missing = api.post(f"/sessions/{UNKNOWN}/stop")
        assert missing.status_code == 404 and f"session #{UNKNOWN} does not exist" in missing.text
        word = api.post("/sessions/nine/stop")
        assert word.status_code == 422 and "session_id" in word.text
        via_chat = api.post("/chat", {"text": "stop"})
        assert via_chat.json() == {"ok": False, "text": "error: missing session <id>\nusage: stop <id>"}
        assert state(api.pacer) == before
    finally:
        api.close()


def test_a_pacer_stop_comment_on_github_stops_the_session(
    engine: Engine, clock: Any, deferrer: Any, github: FakeGithub
) -> None:
    pacer = make_pacer(engine, clock, deferrer, GITHUB_TOKEN="ghp_test", GITHUB_API_URL=github.url + "/",
                       PACER_ROSTER="github:bob=operator")
    sid = _running(pacer)
    app = create_app(pacer, start_scheduler=False)
    with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        for text in (f"/pacer stop {UNKNOWN}", "/pacer stop", f"/pacer stop {sid}"):
            body = json.dumps(comment_payload(text, commenter="bob", association="MEMBER")).encode()
            answer = client.post("/github/webhook", content=body, headers=headers("issue_comment", body))
            assert answer.status_code == 202, answer.text
            assert app.state.github.drain(10)
    replies = [c["body"].removeprefix(markers.REPLY + "\n") for c in github.comments.values()]
    assert len(replies) == 3, replies
    assert replies[0].startswith(f"@bob `/pacer stop {UNKNOWN}` was refused:")
    assert f"session #{UNKNOWN} does not exist" in replies[0]
    assert "missing session <id>" in replies[1]
    assert replies[2].startswith(f"@bob `/pacer stop {sid}`:") and "its running turn was halted" in replies[2]
    session, turns = _row(pacer, sid)
    assert (session.status, turns) == ("archived", ["halted"])
    assert session.source["stopped"] == {"by": "github:bob", "why": "stop", "label": None, "halted": True}
