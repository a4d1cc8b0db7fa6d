"""Seed 001, "What the ceiling counts, and what it does not": the gate card says how many turns
are started but wait for a worker — "N of them waiting for one of the M worker slots". Pacer
has two such populations, each shown here with the real part that makes it: a turn handed to
worker machines that no worker has claimed (`leases.claim`), and a turn the process's own
thread pool holds behind its busy threads. Pacer counts both as running from the start."""

from __future__ import annotations

import threading
from datetime import timedelta
from itertools import count

import pytest
from sqlmodel import Session as DBSession

from bot.api import intake
from integrations.runners.pool import ThreadWorkerPool
from scheduler.engine.fleet import waiting_for_workers
from scheduler.engine.leases import claim
from scheduler.engine.turns import submit_turn
from scheduler.ports import Outcome, TurnRequest, TurnResult
from scheduler.steering.gate_card import build_card, render_card
from scheduler.store.db import session_scope
from scheduler.store.models import Turn
from scheduler.store.sessions import NewSession
from tests.support.harness import build, new


class Queued:
    """The TurnDispatcher port as worker machines look from here: the job is deferred, and no
    worker has taken it."""

    def __init__(self) -> None:
        self.ids = count(1)

    def enqueue(self, db: DBSession, turn_id: int, session_id: int) -> int:
        return next(self.ids)

    def halt(self, db: DBSession, job_id: int) -> bool:
        return True

    def end(self, db: DBSession, job_id: int) -> None:
        return None

    def stalled(self, db: DBSession) -> list[int]:
        return []


class Blocking:
    """A runner whose turns run until the test lets them finish."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.ran: list[int] = []

    def run(self, request: TurnRequest) -> TurnResult:
        self.ran.append(request.turn_id)
        self.release.wait(30)
        return TurnResult(Outcome.SUCCESS, output="done")

    def halt(self, turn_id: int) -> bool:
        return False


def start(ctx, title: str) -> int:
    return intake.api_session(ctx, NewSession(title=title, scheduling_class="priority"), f"work on {title}").session_id


def card_of(ctx):
    with session_scope(ctx.engine) as db:
        return build_card(db, ctx, None, ctx.clock.now())


def running_turns(ctx) -> list[Turn]:
    with session_scope(ctx.engine) as db:
        return list(db.exec(Turn.__table__.select().where(Turn.status == "running")))  # type: ignore[attr-defined]


def test_turns_no_worker_machine_has_claimed_wait_for_one_of_the_worker_slots(any_engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(any_engine, clock, max_sessions=10, wired=True)
    ctx.ports.dispatcher = Queued()
    ctx.limits.agent_workers = 4
    for i in range(3):
        start(ctx, f"queued {i}")
    card = card_of(ctx)
    assert card.running_priority == 3 and card.waiting_for_workers == 3
    assert card.as_dict()["fleet"]["waiting_for_workers"] == 3 and card.as_dict()["fleet"]["workers"] == 4
    assert ("slots 3.0 of 4 in use (3 priority, 0 spot running) · 3 of them waiting for one of the 4 worker slots "
            "(counted: a turn runs from its start, not from when a worker takes it)") in render_card(card)
    first = running_turns(ctx)[0]
    assert claim(ctx.engine, first.id, "worker-1:42:abc", clock.now() + timedelta(seconds=30))
    assert card_of(ctx).waiting_for_workers == 2
    assert "2 of them waiting for one of the 4 worker slots" in render_card(card_of(ctx), "slack")


def test_turns_past_the_pools_threads_wait_in_it_and_are_counted(
    any_engine, clock, request: pytest.FixtureRequest
) -> None:
    ctx, _deferrer, _workers, _quota = build(any_engine, clock, max_sessions=1, wired=True)
    runner = Blocking()
    pool = ThreadWorkerPool(runner, 1)
    request.addfinalizer(lambda: (runner.release.set(), pool.shutdown(wait=True)))
    ctx.ports.workers, ctx.owner, ctx.limits.agent_workers = pool, "serve-1:7:xyz", 1
    start(ctx, "first")
    start(ctx, "second")  # priority: never held by the slots, so it goes past the one thread
    deadline = threading.Event()
    for _ in range(200):
        if runner.ran:
            break
        deadline.wait(0.01)
    assert len(runner.ran) == 1 and len(running_turns(ctx)) == 2
    with session_scope(ctx.engine) as db:
        assert waiting_for_workers(db, 1) == 1
    assert (
        "2.0 of 1 in use (2 priority, 0 spot running) · 1 of them waiting for one of the 1 worker slots"
        in render_card(card_of(ctx))
    )
    runner.release.set()
    pool.shutdown(wait=True)
    assert len(runner.ran) == 2
    with session_scope(ctx.engine) as db:
        assert waiting_for_workers(db, 1) == 0


def test_nothing_waits_when_every_started_turn_is_on_a_thread(any_engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(any_engine, clock, max_sessions=4, wired=True)
    start(ctx, "one")
    card = card_of(ctx)
    assert card.waiting_for_workers == 0 and "waiting for one of" not in render_card(card)


def test_a_turn_waiting_for_a_worker_is_counted_so_a_burst_cannot_pass_the_ceiling(any_engine, clock) -> None:
    """A deviation from seed 001's population, measured: the seed gates a turn when a worker
    performs it, so a queued turn has not been admitted yet. Pacer gates it when it starts, in the
    transaction that hands it to the worker machines, and a worker later runs it without asking
    again. Not counting it there, a burst of 20 spot sessions with max sessions 2 and 12 workers
    started all 20, and 20 ran once the workers claimed them; counted, 2 start and the rest wait."""
    ctx, _deferrer, _workers, _quota = build(any_engine, clock, max_sessions=2, wired=True)
    ctx.ports.dispatcher = Queued()
    ctx.limits.agent_workers = 12
    outcomes = [submit_turn(ctx, new(ctx, genesis="schedule"), "go").outcome for _ in range(20)]
    assert outcomes.count("started") == 2 and outcomes.count("held") == 18
    with session_scope(ctx.engine) as db:
        assert waiting_for_workers(db, 12) == 2  # shown on the gate card, and counted
    for turn in running_turns(ctx):
        assert claim(ctx.engine, turn.id, f"worker-{turn.id}:1:x", clock.now() + timedelta(seconds=30))
    assert len(running_turns(ctx)) == 2
