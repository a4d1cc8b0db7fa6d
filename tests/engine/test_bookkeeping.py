"""Pacer's own bookkeeping (issue #34, P22 item 7; seed 001, "A status-summary fork is refused,
never queued"): `/pacer summary <id>` forks a bookkeeping session that writes a blurb about
another session, created through the one door every session takes, the gate asked before the
fork. Refused — by the gate or by an operator hold — no session is created and the blurb comes
from the record; a fork that reaches admission and is refused is archived, never held, with no
re-check. On the wired engine over SQLite and PostgreSQL, and `/pacer` over the served app."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlmodel import func, select

from bot.chat import answers
from scheduler.engine.records import hold_job_id
from scheduler.engine.turns import submit_turn
from scheduler.holds.operator import place_hold
from scheduler.steering.summary import summarize
from scheduler.store.db import session_scope
from scheduler.store.models import Session
from tests.support.api_client import TOKEN
from tests.support.harness import build, new, row

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def sessions(engine) -> int:
    with session_scope(engine) as db:
        return int(db.exec(select(func.count()).select_from(Session)).one())


def test_a_bookkeeping_turn_an_operator_hold_would_hold_is_refused_not_held(any_engine, clock) -> None:
    """The race the check before the fork cannot close: the fork reaches admission under a hold."""
    ctx, deferrer, _workers, _quota = build(any_engine, clock, wired=True)
    place_hold(ctx, "all", armer="U_OPS", reason="freeze")
    sid = new(ctx, bookkeeping=True, title="Summary of #1")
    sub = submit_turn(ctx, sid, "summarize #1")
    s = row(ctx, sid)
    assert sub.outcome == "refused" and sub.reason == "operator_hold" and "freeze" in sub.sentence
    assert s.status == "archived" and s.hold_reason is None and s.hold_retry_at is None
    assert hold_job_id(sid) not in deferrer.pending()


def test_a_summary_is_a_spot_bookkeeping_fork_at_default_precedence_on_no_list(any_engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(any_engine, clock, wired=True, max_sessions=2)
    source = new(ctx, title="the real work", precedence=40, scheduling_class="priority")
    assert submit_turn(ctx, source, "work").outcome == "started"
    result = summarize(ctx, source, actor="alice", surface="console")
    assert result.outcome == "forked" and result.session_id is not None
    fork = row(ctx, result.session_id)
    assert fork.bookkeeping and fork.forked_from_id == source and fork.status == "running"
    assert fork.precedence == 0 and fork.scheduling_class == "spot"  # not the source's +1, not its class
    assert f"session #{source}" in fork.prompt and fork.requester == "alice"


def test_a_full_fleet_gets_the_blurb_from_the_record_and_no_fork_is_made(any_engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(any_engine, clock, wired=True, max_sessions=1)
    source = new(ctx, title="the real work")
    assert submit_turn(ctx, source, "work").outcome == "started"
    before, alarms = sessions(any_engine), deferrer.pending()
    result = summarize(ctx, source)
    assert result.outcome == "refused" and result.session_id is None
    assert "every session slot is taken (1.0 of 1 in use" in result.sentence
    assert result.digest.startswith(f"#{source} the real work is running")
    assert sessions(any_engine) == before and deferrer.pending() == alarms  # nothing created, nothing armed


def test_an_operator_hold_refuses_the_summary_before_the_fork(any_engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(any_engine, clock, wired=True)
    source = new(ctx, title="the real work", genesis="schedule")
    place_hold(ctx, "genesis", ["schedule"], armer="U_OPS", reason="cron storm")
    before, alarms = sessions(any_engine), deferrer.pending()
    result = summarize(ctx, source)
    assert result.outcome == "refused" and "cron storm" in result.sentence
    assert sessions(any_engine) == before and deferrer.pending() == alarms


@pytest.mark.api(max_sessions=1, turn_minutes=30)
def test_pacer_summary_on_the_served_app(api) -> None:
    ctx = api.ctx
    source = new(ctx, title="the real work", requester="alice")
    assert submit_turn(ctx, source, "work").outcome == "started"
    refused = answers.answer(api.pacer, "alice", f"summary {source}", surface="console")
    assert refused.ok and refused.text.startswith(f"No summary session for #{source}: admission would refuse it")
    assert f"#{source} the real work is running" in refused.text
    assert sessions(ctx.engine) == 1

    assert answers.answer(api.pacer, "alice", "policy set max_sessions=2", surface="console").ok
    forked = answers.answer(api.pacer, "alice", f"summary #{source}", surface="console")
    assert forked.ok and "is writing it, as Pacer's own bookkeeping" in forked.text, forked.text
    fork = sessions(ctx.engine)
    assert fork == 2
    queue = answers.answer(api.pacer, "alice", "queue", surface="console").text
    assert "Summary of" not in queue and f"#{source} the real work" in queue  # on no list a person reads
    listed = api.get("/sessions", params={"order": "precedence"}).json()
    assert [s["id"] for s in listed["sessions"]] == [source]

    for text, problem in [
        ("summary 999", "session #999 does not exist"),
        ("summary x", "id: 'x' is not an id; use a number like 42 or #42"),
        ("summary 2", "#2 is Pacer's own bookkeeping (a summary); ask for a summary of the session it is about"),
    ]:
        reply = answers.answer(api.pacer, "alice", text, surface="console")
        assert not reply.ok and problem in reply.text, reply.text
    assert sessions(ctx.engine) == 2  # bad input changed nothing

    api.deferrer.advance(timedelta(minutes=31))  # both turns end: the fork is not among the finished either
    assert row(ctx, 2).status in ("done", "needs_input") and row(ctx, source).status in ("done", "needs_input")
    with httpx.Client(base_url=api.server.url, timeout=30) as browser:
        assert browser.get("/", params={"token": TOKEN}).status_code == 303
        finished = browser.get("/live/state").json()["sections"]["finished"]
    assert "the real work" in finished and "Summary of" not in finished


@pytest.mark.api(max_sessions=1, turn_minutes=30)
def test_the_rest_api_asks_for_a_summary_the_same_way(api) -> None:
    ctx = api.ctx
    source = new(ctx, title="the real work", requester="bob")
    assert submit_turn(ctx, source, "work").outcome == "started"
    refused = api.post(f"/sessions/{source}/summary", actor="bob")
    assert refused.status_code == 200 and refused.json()["outcome"] == "refused", refused.text
    assert refused.json()["session_id"] is None and refused.json()["digest"].startswith(f"#{source} the real work")
    assert sessions(ctx.engine) == 1
    assert api.patch("/policy", {"max_sessions": 2}).status_code == 200
    forked = api.post(f"/sessions/{source}/summary", actor="bob").json()
    assert forked["outcome"] == "forked" and row(ctx, forked["session_id"]).bookkeeping
    missing = api.post("/sessions/999/summary", actor="bob")
    assert missing.status_code == 404 and "session #999 does not exist" in missing.text
    again = api.post(f"/sessions/{forked['session_id']}/summary", actor="bob")
    assert again.status_code == 422 and "Pacer's own bookkeeping" in again.text
    assert sessions(ctx.engine) == 2
