"""One person's back-to-back Slack commands apply in the order they arrived: `/pacer promote 10`,
`demote 10`, `demote 10 top` end spot at the head of the queue, each answered in turn; replies in
a session's thread reach it in the order they were written; other work runs beside them on the
edge's pool. Real signed requests into the real Bolt app, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import col, select

from integrations.tracked_pool import InOrder, TrackedPool
from scheduler.store.models import HumanMessage, Session
from scheduler.store.sessions import NewSession, create_session
from tests.support.slack_mock import MockSlack, serving

ROUNDS = 10
STEPS = ("promote {id}", "demote {id}", "demote {id} top")


@pytest.fixture
def slack_any(any_engine: Engine, clock: Any, deferrer: Any, mock: MockSlack) -> Iterator[Any]:
    with serving(any_engine, clock, deferrer, mock, PACER_MAX_SESSIONS="1") as client:
        yield client


def _sessions(slack: Any, count: int) -> list[int]:
    with slack.pacer.db() as db:
        rows = [
            create_session(
                db, NewSession(title=f"task {n}", genesis="api", requester="UMEM"), now=slack.pacer.clock.now()
            )
            for n in range(count)
        ]
        return [int(row.id) for row in rows]


def test_promote_demote_demote_top_back_to_back_apply_in_order(slack_any: Any, mock: MockSlack) -> None:
    busy, *ids = _sessions(slack_any, ROUNDS + 1)
    assert (
        slack_any.command(f"start {busy}", name="busy").status_code == 200
    )  # the only slot: a promotion waits, not runs
    slack_any.settle()
    names = []
    for session_id in ids:
        for n, step in enumerate(STEPS):
            names.append(f"s{session_id}-{n}")
            assert slack_any.command(step.format(id=session_id), name=names[-1]).status_code == 200
    slack_any.settle()
    with slack_any.pacer.db() as db:
        rows = {sid: db.get(Session, sid) for sid in ids}
        ends = {sid: (row.scheduling_class, row.precedence) for sid, row in rows.items()}
    assert {sid: cls for sid, (cls, _p) in ends.items()} == dict.fromkeys(ids, "spot"), ends
    precedences = [ends[sid][1] for sid in ids]
    assert precedences == sorted(set(precedences)), ends  # each put at the head above the one before
    answered = [c.path.removeprefix("/response/") for c in mock.calls if c.path.startswith("/response/s")]
    assert answered == names  # each answered in the order it was typed
    texts = [c.body["text"] for c in mock.calls if c.path.startswith("/response/s")]
    assert all("nothing changed" not in t for t in texts), texts  # each step moved what the one before left


def test_replies_in_a_thread_back_to_back_reach_the_session_in_order(slack_any: Any) -> None:
    thread = "1790000000.000100"
    with slack_any.pacer.db() as db:
        row = create_session(
            db, NewSession(title="fix it", genesis="slack", requester="UMEM"), now=slack_any.pacer.clock.now()
        )
        row.thread_key = f"C0WORK:{thread}"
        db.add(row)
        db.flush()
        session_id = int(row.id)
    texts = [f"reply {n}" for n in range(ROUNDS)]
    for n, reply in enumerate(texts):
        event = {
            "type": "message",
            "channel": "C0WORK",
            "user": "UMEM",
            "text": reply,
            "ts": f"1790000001.{n:06d}",
            "thread_ts": thread,
            "channel_type": "channel",
        }
        assert slack_any.event(event, event_id=f"EvReply{n}").status_code == 200
    slack_any.settle()
    with slack_any.pacer.db() as db:
        stored = db.exec(
            select(HumanMessage.text).where(HumanMessage.session_id == session_id).order_by(col(HumanMessage.id))
        ).all()
    assert list(stored) == texts


def test_work_sharing_a_line_runs_in_turn_and_other_lines_run_beside_it() -> None:
    pool = TrackedPool(4, "test-in-order")
    lines = InOrder(pool)
    gate, ran = threading.Event(), []
    try:
        first = lines.submit(["person:a"], lambda: gate.wait(5) and ran.append("a1"))
        second = lines.submit(["person:a", "session:7"], ran.append, "a2")
        other = lines.submit(["person:b"], ran.append, "b1")
        after = lines.submit(["session:7"], ran.append, "s7")
        assert other.result(timeout=5) is None and ran == ["b1"]  # not held up by a's wait
        assert not (first.done() or second.done() or after.done())  # waiting their turn, holding no thread
        gate.set()
        assert lines.drain(5)
        assert ran == ["b1", "a1", "a2", "s7"]
        failing = lines.submit(["person:a"], lambda: 1 / 0)
        assert isinstance(failing.exception(timeout=5), ZeroDivisionError)
        assert lines.submit(["person:a"], ran.append, "a3").result(timeout=5) is None  # the line moves on
    finally:
        gate.set()
        pool.shutdown(wait=True)
