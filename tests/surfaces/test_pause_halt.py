"""`pause_into_spot_queue` with halt and a resume prompt on every surface (P22 items 5 and 9; seed
001, "Joining the queue on purpose" and its parity row "Stop a running session's turn while parking
it"): the REST API's `halt` and `resume_prompt`, `/pacer pause <id> queue halt with <prompt>` in a
GitHub comment through the signed webhook, and bad input refused with its rule on the REST API, a
signed Slack `/pacer` and the console, changing nothing. The same park through REST, Slack and the
console leaving the same rows is `tests/surfaces/test_parity.py`'s "pause queue halt".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import select

from bot.chat import answers
from scheduler.engine.turns import submit_turn
from scheduler.pauses.ceiling import ceiling_sweep
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Turn
from tests.support.github_support import CommentHook, comment_hook
from tests.support.harness import new, row
from tests.support.slack_mock import MockSlack

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.api(max_sessions=2)]

PROMPT = "pick up the failing login test"


def _running(ctx: Any, *, requester: str = "alice") -> int:
    sid = new(ctx, genesis="command", requester=requester)
    submit_turn(ctx, sid, "do it", kind="first")
    assert row(ctx, sid).status == "running"
    return sid


def _turns(ctx: Any, sid: int) -> list[tuple[str, str]]:
    with session_scope(ctx.engine) as db:
        turns = db.exec(select(Turn).where(Turn.session_id == sid).order_by(Turn.id)).all()  # type: ignore[arg-type]
        return [(t.status, t.prompt) for t in turns]


def _untouched(ctx: Any, sid: int) -> None:
    s = row(ctx, sid)
    assert (s.status, s.pause_reason, s.pause_resume_prompt, s.scheduling_class, s.wake_at) == (
        "running", None, None, None, None)
    assert _turns(ctx, sid) == [("running", "do it")]


def test_rest_parks_with_halt_and_the_sweep_resumes_it_with_the_prompt(api) -> None:
    sid = _running(api.ctx)
    answer = api.post(f"/sessions/{sid}/pause", {"halt": True, "resume_prompt": PROMPT}, actor="alice")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert "Its running turn was halted." in body["sentence"] and "the prompt you left" in body["sentence"]
    assert body["until"] is None and body["session"]["status"] == "waiting"
    parked = row(api.ctx, sid)
    assert (parked.pause_reason, parked.pause_resume_prompt, parked.scheduling_class) == (
        "user_spot_queue", PROMPT, "spot")
    assert _turns(api.ctx, sid) == [("halted", "do it")]
    # The ceiling sweep reaches it with budget and a slot to spare: the next turn is the prompt left.
    api.settle()
    ceiling_sweep(api.ctx)
    api.settle()
    assert _turns(api.ctx, sid) == [("halted", "do it"), ("running", PROMPT)]
    assert row(api.ctx, sid).pause_reason is None


def test_rest_without_halt_lets_the_turn_finish_first(api) -> None:
    sid = _running(api.ctx)
    answer = api.post(f"/sessions/{sid}/pause", {"resume_prompt": PROMPT}, actor="alice")
    assert answer.status_code == 200, answer.text
    assert "Its running turn finishes first, then it sleeps." in answer.json()["sentence"]
    assert _turns(api.ctx, sid) == [("running", "do it")]
    assert row(api.ctx, sid).pending_sleep is True


def test_rest_sleep_until_a_time_takes_the_resume_prompt(api) -> None:
    sid = _running(api.ctx)
    until = api.ctx.clock.now() + timedelta(hours=2)
    answer = api.post(f"/sessions/{sid}/pause", {"until": until.isoformat(), "resume_prompt": PROMPT}, actor="alice")
    assert answer.status_code == 200, answer.text
    assert row(api.ctx, sid).wake_prompt == PROMPT


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"halt": "yes"}, "halt", "Input should be a valid boolean"),
        ({"halt": 1}, "halt", "Input should be a valid boolean"),
        ({"halt": True, "until": "2030-01-01T00:00:00+00:00"}, "halt",
         "halt: only a park in the spot queue stops the running turn"),
        ({"resume_prompt": "   "}, "resume_prompt", None),
        ({"resume_prompt": ""}, "resume_prompt", None),
        ({"resume_prompt": "x" * 100_001}, "resume_prompt", None),
        ({"resume_prompt": 5}, "resume_prompt", None),
        ({"halt": True, "resume": PROMPT}, "resume", "resume: not a field of this request"),
    ],
)
def test_rest_refuses_a_bad_pause_and_changes_nothing(api, body: dict[str, Any], field: str, says: str | None) -> None:
    sid = _running(api.ctx)
    answer = api.post(f"/sessions/{sid}/pause", body, actor="alice")
    assert answer.status_code == 422, answer.text
    refusal = answer.json()
    assert refusal["field"] == field, refusal
    if says is not None:
        assert says in json.dumps(refusal), refusal
    _untouched(api.ctx, sid)


BAD_LINES = [
    ("pause {sid} until 2h halt", "halt: only a park in the spot queue stops the running turn"),
    ("pause {sid} queue halt halt", "unexpected argument 'halt'"),
    ("pause {sid} halt queue", "unexpected argument 'queue'"),
    ("pause {sid} queue with", "missing <prompt> after with"),
    ("pause {sid} queue halt with   ", "missing <prompt> after with"),
    ("pause {sid} queue stop", "unexpected argument 'stop'"),
    ("pause {sid} later", "mode: 'later' is not allowed here"),
]


@pytest.mark.parametrize(("line", "says"), BAD_LINES)
def test_the_console_refuses_a_bad_pause_and_changes_nothing(api, line: str, says: str) -> None:
    sid = _running(api.ctx)
    reply = answers.answer(api.pacer, "alice", line.format(sid=sid), surface="console")
    assert reply.ok is False and says in reply.text, reply.text
    assert "pause <id> [until <time>|queue [halt]] [with <prompt…>]" in reply.text
    _untouched(api.ctx, sid)


def test_the_console_parks_with_halt_and_a_prompt(api) -> None:
    sid = _running(api.ctx)
    reply = answers.answer(api.pacer, "alice", f"pause {sid} queue halt with {PROMPT}", surface="console")
    assert reply.ok and "Its running turn was halted." in reply.text, reply.text
    assert row(api.ctx, sid).pause_resume_prompt == PROMPT
    assert _turns(api.ctx, sid) == [("halted", "do it")]


@pytest.mark.parametrize(("line", "says"), BAD_LINES[:3])
def test_slack_refuses_a_bad_pause_and_changes_nothing(slack, mock: MockSlack, line: str, says: str) -> None:
    ctx = slack.pacer.ctx
    sid = _running(ctx, requester="UOPS")
    assert slack.command(line.format(sid=sid), user="UOPS").status_code == 200
    (answer,) = mock.wait_for_method("/response/cmd", timeout=10)
    slack.settle()
    assert answer.body["response_type"] == "ephemeral" and says in answer.body["text"], answer.body
    _untouched(ctx, sid)


def test_slack_parks_with_halt_and_a_prompt(slack, mock: MockSlack) -> None:
    ctx = slack.pacer.ctx
    sid = _running(ctx, requester="UOPS")
    assert slack.command(f"pause {sid} queue halt with {PROMPT}", user="UOPS").status_code == 200
    (answer,) = mock.wait_for_method("/response/cmd", timeout=10)
    slack.settle()
    assert "Its running turn was halted." in answer.body["text"], answer.body
    assert row(ctx, sid).pause_resume_prompt == PROMPT and _turns(ctx, sid) == [("halted", "do it")]


# --------------------------------------------------------------------------- GitHub, `/pacer` in a comment


@pytest.fixture
def hook(engine: Engine, clock: Any, deferrer: Any) -> Iterator[CommentHook]:
    with comment_hook(engine, clock, deferrer) as served:
        yield served


def test_a_github_comment_parks_with_halt_and_a_prompt(hook: CommentHook, engine: Engine) -> None:
    sid = hook.issue_session()
    assert row(hook.ctx, sid).status == "running"
    reply = hook.command(f"pause {sid} queue halt with {PROMPT}")
    assert "Its running turn was halted." in reply, reply
    with session_scope(engine) as db:
        parked = db.get(Session, sid)
        assert parked is not None
        assert (parked.pause_reason, parked.pause_resume_prompt) == ("user_spot_queue", PROMPT)
    assert [status for status, _ in _turns(hook.ctx, sid)] == ["halted"]


def test_a_github_comment_with_a_bad_pause_is_answered_and_changes_nothing(hook: CommentHook) -> None:
    sid = hook.issue_session()
    reply = hook.command(f"pause {sid} until 2h halt")
    assert "was refused" in reply and "halt: only a park in the spot queue stops the running turn" in reply, reply
    parked = row(hook.ctx, sid)
    assert (parked.status, parked.pause_reason, parked.wake_at) == ("running", None, None)
    assert [status for status, _ in _turns(hook.ctx, sid)] == ["running"]
