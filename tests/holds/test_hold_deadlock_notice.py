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


def test_two_processes_finding_one_deadlock_tell_it_once(any_engine, clock) -> None:
    """Two processes (two contexts on one database) find the same deadlock at once: the first
    records it on the hold's row and holds the row until it commits; the second waits on that
    row, then reads it told and stays quiet."""
    import threading

    from scheduler.engine.effects import Effects
    from scheduler.holds.operator import live_holds, notice_deadlocks
    from tests.support.harness import build, new

    one, *_ = build(any_engine, clock)
    two, *_ = build(any_engine, clock)
    held, armer = new(one, title="Deploy"), new(one, title="Release notes")
    with session_scope(any_engine) as db:
        record_prerequisites(db, db.get(Session, armer), f"depends on #{held}")
        db.get(Session, held).status = "waiting"
    hold = place_hold(one, "session", [str(held)], armer=f"session:{armer}")
    with session_scope(any_engine) as db:  # place_hold told it already: forget that, to race afresh
        db.get(type(hold), hold.id).deadlocks_told = []
    first_wrote, let_go = threading.Event(), threading.Event()
    told: dict[str, int] = {}

    def find(name: str, ctx, hold_on: bool) -> None:
        with session_scope(any_engine) as db:
            now = ctx.clock.now()
            told[name] = len(notice_deadlocks(ctx, db, live_holds(db, now), now, Effects()))
            if hold_on:
                first_wrote.set()
                let_go.wait(5)

    a = threading.Thread(target=find, args=("a", one, True))
    a.start()
    assert first_wrote.wait(5)
    b = threading.Thread(target=find, args=("b", two, False))
    b.start()
    b.join(0.5)  # blocked on the row the first holds
    let_go.set()
    a.join(5)
    b.join(5)
    assert told == {"a": 1, "b": 0}
