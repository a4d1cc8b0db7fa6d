"""A rank at `/pacer new` (P22 item 9; seed 001's parity row "Choose a rank when spawning"): `new
--rank <n>|top` and `rank:<n>|top`, in the words `rank` takes, on the console, a signed Slack
`/pacer` and a GitHub comment, as `POST /api/v1/sessions` takes `precedence` and `place`. A bad
rank is refused with its rule and makes no session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import func, select

from bot.chat import answers
from bot.commands.grammar import USAGE
from scheduler.store.db import session_scope
from scheduler.store.models import Session
from tests.support.github_support import CommentHook, comment_hook
from tests.support.harness import new
from tests.support.slack_mock import MockSlack

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.api(max_sessions=1)]


def _newest(engine: Engine) -> Session:
    with session_scope(engine) as db:
        row = db.exec(select(Session).order_by(Session.id.desc())).first()  # type: ignore[union-attr]
        assert row is not None
        return row


def _count(engine: Engine) -> int:
    with session_scope(engine) as db:
        return int(db.exec(select(func.count()).select_from(Session)).one())


def _said(api: Any, text: str) -> Any:
    return answers.answer(api.pacer, "alice", text, surface="console")


def test_the_console_ranks_a_new_session_as_rest_does(api) -> None:
    said = _said(api, "new --spot --rank 40 fix the login")
    assert said.ok, said.text
    mine = _newest(api.pacer.engine)
    assert (mine.precedence, mine.scheduling_class) == (40, "spot")
    rest = api.post("/sessions", {"title": "fix the login", "prompt": "fix the login", "scheduling_class": "spot",
                                  "precedence": 40}, actor="alice")
    assert rest.status_code == 201, rest.text
    assert rest.json()["session"]["precedence"] == 40
    said = _said(api, "new rank:-5 tidy the docs")
    assert said.ok and _newest(api.pacer.engine).precedence == -5, said.text


def test_rank_top_puts_it_at_the_head_of_the_spot_queue(api) -> None:
    for precedence in (10, 90):
        new(api.ctx, genesis="api", scheduling_class="spot", precedence=precedence)
    said = _said(api, "new rank:top fix the login")
    assert said.ok, said.text
    assert _newest(api.pacer.engine).precedence > 90
    # --spot alone already goes to the head; a number given with it is the person's own answer
    said = _said(api, "new --spot --rank 5 tidy the docs")
    assert said.ok and _newest(api.pacer.engine).precedence == 5, said.text


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("new --rank abc fix it", "rank: 'abc' is not a rank; give a whole number (the precedence) or top"),
        ("new rank:1.5 fix it", "rank: '1.5' is not a rank"),
        ("new --rank 2000000000 fix it", "rank: '2000000000' must be between -1,000,000,000 and 1,000,000,000"),
        ("new --rank 3 rank:4 fix it", "rank: given twice"),
        ("new --rank", "missing a rank after --rank: a whole number or top"),
        ("new --rank 3", "missing <prompt>"),
        ("new --top fix it", "option: '--top' is not an option; the options are --spot, --cap <usd> and --rank"),
    ],
)
def test_a_bad_rank_is_refused_and_makes_no_session(api, line: str, says: str) -> None:
    before = _count(api.pacer.engine)
    said = _said(api, line)
    assert not said.ok and says in said.text and USAGE["new"] in said.text, said.text
    assert _count(api.pacer.engine) == before


def test_slack_new_takes_a_rank(slack: Any, mock: MockSlack) -> None:
    assert slack.command("new --rank 7 fix the login", user="UMEM").status_code == 200
    (answer,) = mock.wait_for_method("/response/cmd", timeout=10)
    slack.settle()
    mine = _newest(slack.pacer.engine)
    assert (mine.precedence, mine.requester, mine.title) == (7, "UMEM", "fix the login"), answer.body
    before = _count(slack.pacer.engine)
    assert slack.command("new --rank soon fix it", user="UMEM", name="bad").status_code == 200
    (bad,) = mock.wait_for_method("/response/bad", timeout=10)
    assert "rank: 'soon' is not a rank" in bad.body["text"] and _count(slack.pacer.engine) == before


@pytest.fixture
def hook(engine: Engine, clock: Any, deferrer: Any) -> Iterator[CommentHook]:
    with comment_hook(engine, clock, deferrer) as served:
        yield served


def test_a_github_comment_new_takes_a_rank(hook: CommentHook, engine: Engine) -> None:
    hook.issue_session()
    reply = hook.command("new --rank 3 fix the login")
    mine = _newest(engine)
    assert (mine.precedence, mine.requester) == (3, "github:bob"), reply
