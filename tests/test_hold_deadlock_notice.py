"""Seed 000, "Held agents": a held agent and the agent that armed its hold, waiting on each other,
post a Hold deadlock notification. On the production wiring (`pacer serve`'s app, its Slack
notifier on the loopback mock): the ops channel and both sessions' threads hear it, once per
deadlock — a sweep, or a second process finding it again, stays quiet."""

from __future__ import annotations

from datetime import timedelta

from scheduler.engine.turns import submit_turn
from scheduler.holds.operator import place_hold
from scheduler.store.db import session_scope
from scheduler.store.models import Session
from scheduler.store.prerequisite_rows import record_prerequisites
from scheduler.store.sessions import NewSession, create_session
from scheduler.wiring import run_periodic


def slack_session(ctx, title: str, ts: str) -> int:
    with session_scope(ctx.engine) as db:
        source = {"slack": {"channel": "C0WORK", "thread_ts": ts, "user": "UMEM", "channel_type": "channel"}}
        s = create_session(db, NewSession(genesis="slack", title=title, source=source), now=ctx.clock.now())
        s.prompt = title
        db.add(s)
        db.flush()
        return s.id or 0


def deadlock_posts(slack) -> list:
    return [c for c in slack.mock.calls_to("chat.postMessage") if "Hold deadlock" in str(c.body.get("text", ""))]


def test_a_hold_deadlock_reaches_the_ops_channel_and_both_threads_once(slack) -> None:
    ctx = slack.pacer.ctx
    held = slack_session(ctx, "Deploy", "1790000000.000100")
    armer = slack_session(ctx, "Release notes", "1790000000.000200")
    with session_scope(ctx.engine) as db:
        record_prerequisites(db, db.get(Session, armer), f"depends on #{held}")
    place_hold(ctx, "session", [str(held)], armer=f"session:{armer}")
    submit_turn(ctx, held, "deploy")
    submit_turn(ctx, armer, "write notes")
    slack.settle()
    posts = deadlock_posts(slack)
    where = sorted((c.body["channel"], c.body.get("thread_ts")) for c in posts)
    assert where == [("C0OPS", None), ("C0WORK", "1790000000.000100"), ("C0WORK", "1790000000.000200")], where
    assert f"#{held} “Deploy” is held by hold" in posts[0].body["text"]
    # The sweep finds it again, and so would another process (the record is in the database).
    ctx.__dict__.pop("_hold_deadlocks_noticed", None)
    run_periodic(ctx, "operator_hold_sweep")
    ctx.clock.advance(timedelta(minutes=5))
    run_periodic(ctx, "operator_hold_sweep")
    slack.settle()
    assert len(deadlock_posts(slack)) == 3
