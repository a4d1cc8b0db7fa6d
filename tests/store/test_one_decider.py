"""Deciders take turns across processes (`scheduler.store.db.one_decider`): several processes deciding
first turns at once on one database never start more than the fleet's slots, nor two sessions of
one concurrency group (seed 002: one run per project), and single and batched decisions over the
same sessions do not deadlock. Real processes on a real SQLite file and on PostgreSQL: before the
lock, eight deciders on PostgreSQL started 8 to 11 turns into 5 slots and 8 at once in one group."""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from scheduler.engine.turns import submit_turn, submit_turns
from scheduler.holds.groups import repository_group
from scheduler.store import db as dbmod
from scheduler.testing import VirtualClock
from tests.support.harness import T0, build, new

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PROCESSES = 4
SLOTS = 5
API = repository_group("acme/api")


def _decide(url: str, session_ids: list[int], batched: bool, start: Any, answers: Any) -> None:
    """One process: its own engine and runtime, deciding its share as soon as all are ready."""
    engine = dbmod.make_engine(url)
    ctx, *_rest = build(engine, VirtualClock(T0), max_sessions=SLOTS, turn_minutes=600, wired=True)
    start.wait(timeout=60)
    if batched:
        outcomes = [
            s.outcome if s is not None else "lost" for s in submit_turns(ctx, [(sid, "go") for sid in session_ids])
        ]
    else:
        outcomes = [submit_turn(ctx, sid, "go").outcome for sid in session_ids]
    answers.put(outcomes)
    engine.dispose()


def _race(engine: Engine, session_ids: list[int], *, batched: list[bool]) -> list[str]:
    # Forked from a server process that imported this module once (a second and a half of CPU a
    # process, paid once, not by each of the sixteen); each child still makes its own engine.
    spawn = multiprocessing.get_context("forkserver")
    spawn.set_forkserver_preload([__name__])
    start, answers = spawn.Barrier(len(batched)), spawn.Queue()
    url = engine.url.render_as_string(hide_password=False)
    shares = [session_ids[i :: len(batched)] for i in range(len(batched))]
    processes = [
        spawn.Process(target=_decide, args=(url, share, b, start, answers))
        for share, b in zip(shares, batched, strict=True)
    ]
    for p in processes:
        p.start()
    outcomes = [o for _ in processes for o in answers.get(timeout=120)]
    for p in processes:
        p.join(timeout=30)
        assert p.exitcode == 0
    return outcomes


_RUNNING_IN_GROUP = text(
    "SELECT count(*) FROM turns JOIN sessions ON sessions.id = turns.session_id WHERE turns.status = 'running' AND "
    "sessions.concurrency_group = :group"
)


def _running(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM turns WHERE status = 'running'")).scalar_one())


def test_processes_deciding_at_once_fill_the_slots_and_run_one_session_of_a_group(any_engine: Engine) -> None:
    ctx, *_rest = build(any_engine, VirtualClock(T0), max_sessions=SLOTS, wired=True)
    grouped = [new(ctx, genesis="api", scheduling_class="spot", concurrency_group=API) for _ in range(4 * PROCESSES)]
    alone = [new(ctx, genesis="api", scheduling_class="spot") for _ in range(SLOTS - 1)]  # one slot left for the group
    ids = [*grouped]
    for n, sid in enumerate(alone):
        ids.insert(n * 5, sid)

    outcomes = _race(any_engine, ids, batched=[False] * PROCESSES)

    assert outcomes.count("started") == SLOTS == _running(any_engine)
    with any_engine.connect() as conn:
        in_group = conn.execute(_RUNNING_IN_GROUP, {"group": API}).scalar_one()
    assert in_group == 1


def test_batches_and_single_decisions_over_one_burst_neither_deadlock_nor_overfill(any_engine: Engine) -> None:
    ctx, *_rest = build(any_engine, VirtualClock(T0), max_sessions=SLOTS, wired=True)
    ids = [new(ctx, genesis="api", scheduling_class="spot") for _ in range(10 * PROCESSES)]

    outcomes = _race(any_engine, ids, batched=[True, False] * (PROCESSES // 2))

    assert "lost" not in outcomes
    assert outcomes.count("started") == SLOTS == _running(any_engine)


def test_a_decider_waits_for_the_lock_at_most_its_wait_and_leaves_lock_timeout_as_it_was(any_engine: Engine) -> None:
    if any_engine.dialect.name != "postgresql":
        pytest.skip("SQLite's BEGIN IMMEDIATE is the lock there")
    with dbmod.session_scope(any_engine) as holder:
        dbmod.one_decider(holder)
        dbmod.one_decider(holder)  # again in the same transaction: held already, no second wait
        with pytest.raises(OperationalError, match="lock timeout"), dbmod.session_scope(any_engine) as waiter:
            dbmod.one_decider(waiter, wait="200ms")  # a decider inside another's would wait for ever
        assert holder.execute(text("SHOW lock_timeout")).scalar_one() == "0"  # row locks wait as before
