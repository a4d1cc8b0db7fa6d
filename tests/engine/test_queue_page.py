"""A page of the queue is read from the head of its indexes, not sorted out of every waiting row
(issue 32, P20 item 4: a pass cost 15 ms at 10,000 waiting and 130–153 ms at 100,000 on SQLite,
because each page read and sorted every waiting row).

The page is read in bands (`engine.candidates`); these tests hold it to the one order the queue
has (`ranking.queue_order`), on SQLite and PostgreSQL, with every way a row resolves its class,
and hold SQLite's plan to the indexes."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, bindparam, event, insert, not_
from sqlalchemy import select as sa_select
from sqlmodel import col

from scheduler.engine.candidates import PAGE, Passed, page
from scheduler.engine.pause import dormant_paused
from scheduler.rules import failures
from scheduler.rules.genesis import SchedulingClass
from scheduler.store.db import core, session_scope
from scheduler.store.models import Session, Status
from scheduler.store.policy import change_policy, load_policy
from scheduler.store.ranking import queue_order
from scheduler.store.sessions import class_expr
from tests.support.harness import T0

GENESES = ("command", "slack", "github_issue", "github_label", "schedule", "ao_event", "api", "unknown",
           "aardvark", "mystery", "zzz")  # the last three name no genesis: the CASE's else


def seed(engine: Engine, n: int, rng: random.Random) -> None:
    rows = []
    for i in range(n):
        retry = rng.random() < 0.1
        rows.append(dict(
            title=f"s{i}", genesis=rng.choice(GENESES),
            scheduling_class=rng.choice((None, None, None, "priority", "spot")),
            precedence=rng.randint(-3, 3), status=rng.choice(("waiting",) * 6 + ("running", "done")),
            runtime=rng.choice(("echo", "other")),
            created_at=T0 - timedelta(minutes=rng.randint(0, 50)),  # ties: the id breaks them
            source={}, attachments=[], hold_attachments=[],
            hold_reason=None if rng.random() < 0.1 else (
                sorted(failures.RETRY_HOLD_REASONS)[0] if retry else "at_utilization_limit"),
            hold_retry_at=T0 + timedelta(minutes=rng.randint(-30, 30)),
            pause_reason="paused_at_ceiling" if rng.random() < 0.05 else None,
            park_reason="auth_outage" if rng.random() < 0.03 else None,
            concurrency_group=rng.choice((None, None, "g1", "g2")),
            trigger_id=None,
        ))
    with session_scope(engine) as db:
        db.execute(insert(Session), rows)


def reference(db: Any, passed: Passed, limit: int) -> list[int]:
    """The page as one statement ordered by `ranking.queue_order`: what every band must add up to."""
    policy = load_policy(db)
    resolved = class_expr(policy)
    group = col(Session.concurrency_group)
    stmt = (
        sa_select(col(Session.id))
        .where(
            col(Session.status) == Status.WAITING.value,
            col(Session.hold_reason).is_not(None),
            col(Session.pause_reason).is_(None),
            col(Session.park_reason).is_(None),
            col(Session.hold_reason).not_in(sorted(failures.RETRY_HOLD_REASONS))
            | (col(Session.hold_retry_at) <= bindparam("now")),
            col(Session.id).not_in(bindparam("seen", expanding=True)),
            group.is_(None) | not_(group.in_(bindparam("full", expanding=True))),
            not_(
                (resolved == SchedulingClass.SPOT.value) & col(Session.runtime).in_(bindparam("paced", expanding=True))
            ),
        )
        .order_by(*queue_order(resolved))
        .limit(limit)
    )
    return [int(r[0]) for r in core(db, stmt, passed.params(T0))]


@pytest.mark.parametrize("overrides", [{}, {"api": "priority", "command": "spot", "unknown": "spot"}])
def test_a_page_is_the_head_of_the_queue_in_its_order(any_engine: Engine, overrides: dict[str, str]) -> None:
    rng = random.Random(11)
    seed(any_engine, 1500, rng)
    with session_scope(any_engine) as db:
        if overrides:
            change_policy(db, {"genesis_class_overrides": overrides}, surface="test", actor=None, now=T0)
    with session_scope(any_engine) as db:
        policy = load_policy(db)
        everyone = reference(db, Passed(), 10_000)
        assert len(everyone) > 500
        cases = [
            Passed(),
            Passed(seen=tuple(everyone[:40])),
            Passed(full_groups=("g1",)),
            Passed(paced=("echo",)),
            Passed(seen=tuple(rng.sample(everyone, 300)), full_groups=("g2",), paced=("other",)),
            Passed(paced=("echo", "other")),
        ]
        for passed in cases:
            for limit in (1, PAGE, 200):
                _awake, ids = page(db, policy, T0, limit, passed)
                assert ids == reference(db, passed, limit), (passed, limit)


def test_a_page_reads_the_head_of_its_indexes_on_sqlite(engine: Engine) -> None:
    """No band of the page scans the table or sorts the spot queue: the rest of the queue is a
    walk down `ix_sessions_rank` in its order, and each priority band a range of the class index.
    Before, one statement searched the status index and sorted every waiting row."""
    seed(engine, 300, random.Random(5))
    plan = _plan(engine, lambda db: page(db, load_policy(db), T0, PAGE, Passed(seen=(1, 2))), "hold_retry_at")
    searches = [line for line in plan if "sessions" in line and ("SEARCH" in line or "SCAN" in line)]
    assert searches, plan
    assert not [line for line in searches if line.startswith("SCAN sessions")], plan
    assert all("ix_sessions_rank" in line or "ix_sessions_class_rank" in line for line in searches), plan
    walk = plan.index(next(line for line in searches if "ix_sessions_rank" in line))
    assert "TEMP B-TREE" not in plan[walk + 1], plan  # the rest of the queue is read in its order, not sorted


def test_the_first_paused_session_is_read_from_its_own_index_on_sqlite(engine: Engine) -> None:
    seed(engine, 300, random.Random(6))
    plan = _plan(engine, lambda db: dormant_paused(db, load_policy(db), 8), "pause_reason IS NOT NULL")
    assert any("ix_sessions_paused" in line for line in plan), plan


def _plan(engine: Engine, read: Callable[[Any], object], marker: str) -> list[str]:
    """SQLite's plan for the statement `read` runs that contains `marker`."""
    captured: list[tuple[str, Any]] = []

    def grab(_conn: Any, _cur: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        captured.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", grab)
    try:
        with session_scope(engine) as db:
            read(db)
    finally:
        event.remove(engine, "before_cursor_execute", grab)
    statement, parameters = next((s, p) for s, p in captured if marker in s)
    with sqlite3.connect(str(engine.url.database)) as con:
        return [str(row[3]) for row in con.execute("EXPLAIN QUERY PLAN " + statement, parameters)]
