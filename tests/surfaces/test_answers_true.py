"""Answers that are true (issue P11, item 2): what every surface says about a session matches
what the scheduler will do with it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.chat import answers
from integrations.github.status import status_view
from scheduler.engine.turns import submit_turn
from scheduler.holds.view import all_holds, render_holds
from scheduler.rules.genesis import SchedulingClass
from scheduler.store.db import session_scope
from scheduler.store.models import Session
from scheduler.store.policy import change_policy
from tests.support.harness import new, row

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.api(max_sessions=2, turn_minutes=30),
]

LIVE_SPOT_HOLD = ("Held by the spot gate", "Priority sessions are unaffected")


def test_a_spot_hold_a_genesis_override_has_overtaken_is_shown_as_overtaken_everywhere(api) -> None:
    """Seed 001, "A hold a promotion has overtaken": a class that is no longer spot has no spot
    hold to show — at once, before any re-check, on every surface."""
    ctx = api.ctx
    api.quota.spend_out()
    sid = new(ctx, genesis="api", title="nightly sweep")
    assert submit_turn(ctx, sid, "sweep").reason == "at_utilization_limit"
    with session_scope(ctx.engine) as db:
        change_policy(
            db, {"genesis_class_overrides": {"api": "priority"}}, surface="test", actor=None, now=ctx.clock.now()
        )
    assert row(ctx, sid).hold_reason == "at_utilization_limit"  # the record stays until the next pass

    why = answers.answer(api.pacer, "console", f"why {sid}", surface="console").text
    detail = api.get(f"/sessions/{sid}").json()
    with session_scope(ctx.engine) as db:
        holds = render_holds(all_holds(db, ctx.clock.now()))
        github = status_view(db.get(Session, sid), SchedulingClass.PRIORITY, ctx.clock.now())
    headline = detail["waiting"]["headline"]

    for said in (why, headline["sentence"], holds, github.why or ""):
        assert not any(phrase in said for phrase in LIVE_SPOT_HOLD), said
        assert "it is priority now" in said, said
    assert headline["reason"] == "overtaken_by_class" and detail["scheduling_class"] == "priority"
    assert github.state == "queued"


def test_whatif_spot_says_a_new_spot_session_would_not_start_under_hold_all(api) -> None:
    ask = lambda text: answers.answer(api.pacer, "alice", text, surface="console")  # noqa: E731
    assert "would start now" in ask("whatif --spot").text
    placed = ask("hold all for 2h release freeze")
    assert placed.ok, placed.text
    said = ask("whatif --spot").text
    assert "would not start now" in said and "release freeze" in said, said
    created = ask("new --spot tidy the changelog")  # and what it said is what happens
    assert created.ok and row(api.ctx, 1).hold_reason == "operator_hold", created.text


def test_start_refuses_a_done_session_on_every_surface_and_says_to_reply(api) -> None:
    """`start` starts queued work (its help says so); a done session has none, and a continue
    nudge would spend quota nobody asked for."""
    ctx = api.ctx
    sid = new(ctx, genesis="command", requester="alice", prompt="write it")
    assert submit_turn(ctx, sid, "write it").outcome == "started"
    api.deferrer.advance(timedelta(minutes=31))
    assert row(ctx, sid).status == "done"

    said = answers.answer(api.pacer, "alice", f"start {sid}", surface="console")
    r = api.post(f"/sessions/{sid}/start_now")
    helped = answers.answer(api.pacer, "alice", "help start", surface="console").text

    assert not said.ok and f"reply {sid} <text>" in said.text
    assert r.status_code == 409 and f"reply {sid} <text>" in r.text
    assert len(api.workers.submitted) == 1 and row(ctx, sid).status == "done"
    assert "a done session is continued with reply" in helped
