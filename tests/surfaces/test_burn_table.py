"""The $/min burn table on every surface (P22 item 9; seed 001's parity row "Read the $/min of each
harness + model combination"): `GET /api/v1/burn`, `/pacer burn` on the console, a signed Slack
`/pacer` and a GitHub comment, and the live page, all from `scheduler.steering.burn_view.burn_rows`,
the table the gate projects with, refreshed from finished turns by the production refresh
(`bot.runtime.process.refresh_burn`). A stray word is refused with the usage and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import select

from bot.chat import answers
from bot.runtime.process import refresh_burn
from scheduler.engine.completion import complete_turn
from scheduler.engine.turns import submit_turn
from scheduler.ports import Outcome, TurnResult
from scheduler.store.db import session_scope
from scheduler.store.models import Turn
from tests.support.api_client import TOKEN
from tests.support.github_support import CommentHook, comment_hook
from tests.support.harness import new
from tests.support.slack_mock import MockSlack

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# Three finished claude_code turns: $3.00 over 10 minutes is $0.30 a minute.
LINE = "claude_code: $0.3000/min ($3.00 in 10 min) · measured over the runtime's last 3 finished turns"


def _history(pacer: Any) -> None:
    ctx = pacer.ctx
    sid = new(ctx, genesis="api", runtime="claude_code")
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        for cost, minutes in ((1.0, 2), (0.5, 3), (1.5, 5)):
            db.add(Turn(session_id=sid, status="done", runtime="claude_code", cost_usd=cost,
                        duration_ms=minutes * 60_000, created_at=now - timedelta(minutes=minutes),
                        started_at=now - timedelta(minutes=minutes), finished_at=now))
    refresh_burn(ctx, pacer.settings)  # the BURN_REFRESH alarm's work


def test_rest_and_the_console_show_the_same_table(api) -> None:
    _history(api.pacer)
    answer = api.get("/burn", actor="bob")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["projection_minutes"] == 10
    (measured,) = [r for r in body["rates"] if r["runtime"] == "claude_code"]
    assert measured == {"runtime": "claude_code", "model": None, "usd_per_minute": pytest.approx(0.3),
                        "projected_usd": pytest.approx(3.0), "turns": 3, "source": "runtime"}
    echo = next(r for r in body["rates"] if r["runtime"] == "echo")
    assert (echo["source"], echo["turns"]) == ("fallback", 0) and echo["usd_per_minute"] > 0
    said = answers.answer(api.pacer, "bob", "burn", surface="console")
    assert said.ok and LINE in said.text, said.text
    assert f"echo: ${echo['usd_per_minute']:.4f}/min" in said.text and "configured: no finished turn" in said.text


def test_a_turn_that_says_its_model_gets_a_row_of_its_own(api) -> None:
    # The worker's report goes through the one completion path; the model it names keys the rate.
    ctx = api.ctx
    sid = new(ctx, genesis="api", runtime="claude_code")
    submit_turn(ctx, sid, "do it", kind="first")
    with session_scope(ctx.engine) as db:
        turn = db.exec(select(Turn).where(Turn.session_id == sid)).one()
        turn.runtime = "claude_code"  # as the command runner's runtime records it
        db.add(turn)
    turn_id = turn.id or 0
    api.ctx.clock.advance(timedelta(minutes=4))
    complete_turn(ctx, turn_id, TurnResult(Outcome.SUCCESS, cost_usd=2.0, duration_ms=240_000,
                                           model="claude-opus-4-1"))
    refresh_burn(ctx, api.pacer.settings)
    rates = api.get("/burn", actor="bob").json()["rates"]
    (opus,) = [r for r in rates if r["model"] == "claude-opus-4-1"]
    assert (opus["runtime"], opus["usd_per_minute"], opus["turns"], opus["source"]) == (
        "claude_code", pytest.approx(0.5), 1, "history")
    said = answers.answer(api.pacer, "bob", "burn", surface="console")
    assert ("claude_code · claude-opus-4-1: $0.5000/min ($5.00 in 10 min) · measured over its last finished turn"
            in said.text), said.text


def test_the_live_page_shows_the_table(api) -> None:
    _history(api.pacer)
    state = api.client.get("/live/state", headers={"Authorization": f"Bearer {TOKEN}"})
    assert state.status_code == 200, state.text
    burn = state.json()["sections"]["burn"]
    assert "<td>claude_code</td>" in burn and "$0.3000" in burn and "the runtime's last 3 finished turns" in burn
    page = api.client.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert 'id="burn"' in page.text and "$0.3000" in page.text


def test_a_stray_word_is_refused_with_the_usage(api) -> None:
    said = answers.answer(api.pacer, "bob", "burn now", surface="console")
    assert not said.ok and "unexpected argument 'now'" in said.text and "usage" in said.text.lower(), said.text
    assert api.call("POST", "/burn", actor="bob").status_code == 405


def test_slack_shows_the_table_to_a_member(slack: Any, mock: MockSlack) -> None:
    _history(slack.pacer)
    assert slack.command("burn", user="UMEM").status_code == 200
    (answer,) = mock.wait_for_method("/response/cmd", timeout=10)
    assert LINE in answer.body["text"] and answer.body["response_type"] == "ephemeral", answer.body
    assert slack.command("burn all", user="UMEM", name="bad").status_code == 200
    (bad,) = mock.wait_for_method("/response/bad", timeout=10)
    assert "unexpected argument 'all'" in bad.body["text"], bad.body


@pytest.fixture
def hook(engine: Engine, clock: Any, deferrer: Any) -> Iterator[CommentHook]:
    with comment_hook(engine, clock, deferrer) as served:
        yield served


def test_a_github_comment_shows_the_table(hook: CommentHook) -> None:
    _history(hook.app.state.pacer)
    reply = hook.command("burn")
    assert LINE in reply, reply
