"""Turns on worker machines through procrastinate (`integrations/turn_queue.py`): its schema is
part of Pacer's migrations; a start defers the turn's job in the deciding transaction; a worker
claims a turn once however often its job is delivered; a halt decided anywhere reaches the job;
a job a dead worker holds is ended and its turn given back, never retried."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from alembic import command
from procrastinate.job_context import AbortReason
from procrastinate.schema import SchemaManager
from sqlalchemy import Engine, inspect, text
from sqlmodel import col, select

from bot.runtime.adapters import libpq_url
from integrations.runners.pool import ThreadWorkerPool
from integrations.turn_leases import LeasedPool
from integrations.turn_queue import TurnHost, TurnQueue, build_app
from scheduler.context import Context
from scheduler.engine.attempt import TurnAttempt, Work
from scheduler.engine.lifecycle import archive, recover_lost_turns
from scheduler.engine.records import lock, start
from scheduler.engine.turns import submit_turn
from scheduler.ports import Outcome, TurnRequest, TurnResult
from scheduler.store import db as dbmod
from scheduler.store.db import session_scope
from scheduler.store.models import Turn
from tests.support.harness import build, new, row
from tests.support.paths import ROOT

VENDORED = ROOT / "scheduler" / "store" / "migrations" / "versions" / "0007_procrastinate_3_10_0.sql"


def test_the_vendored_schema_is_the_pinned_procrastinates_own() -> None:
    assert VENDORED.read_text(encoding="utf-8") == SchemaManager.get_schema(), (
        "procrastinate's schema changed: pin the version migration 0007 vendors, or add a revision applying its SQL "
        "migrations"
    )


def test_migrate_gives_postgresql_procrastinates_tables_and_every_database_the_job_column(any_engine: Engine) -> None:
    tables = set(inspect(any_engine).get_table_names())
    assert "job_id" in {c["name"] for c in inspect(any_engine).get_columns("turns")}
    if any_engine.dialect.name == "postgresql":
        assert {"procrastinate_jobs", "procrastinate_workers", "procrastinate_events"} <= tables
        cfg = dbmod.alembic_config(any_engine.url.render_as_string(hide_password=False))
        command.downgrade(cfg, "0006")
        try:
            assert not any(t.startswith("procrastinate") for t in inspect(any_engine).get_table_names())
        finally:
            command.upgrade(cfg, "head")
        assert "procrastinate_jobs" in inspect(any_engine).get_table_names()
    else:
        assert not any(t.startswith("procrastinate") for t in tables)


# --- the dispatcher and run_turn, in one process on PostgreSQL -----------------------------------

LEASE = timedelta(seconds=30)


@pytest.fixture
def queue_ctx(any_engine: Engine, clock):  # type: ignore[no-untyped-def]
    """A context whose turns go to procrastinate, as `pacer serve` with PACER_TURN_QUEUE=procrastinate."""
    if any_engine.dialect.name != "postgresql":
        pytest.skip("procrastinate runs on PostgreSQL only")
    ctx, _deferrer, workers, _quota = build(any_engine, clock, max_sessions=4)
    ctx.owner, ctx.limits.turn_lease = "serve", LEASE
    ctx.ports.dispatcher = TurnQueue(
        build_app(libpq_url(any_engine.url.render_as_string(hide_password=False))), stalled_after=LEASE
    )
    return ctx, workers


def _job(ctx: Context, job_id: int | None) -> tuple[Any, ...] | None:
    with ctx.engine.connect() as conn:
        row = conn.execute(
            text("SELECT status, lock, queue_name, args, abort_requested FROM procrastinate_jobs WHERE id = :i"),
            {"i": job_id},
        ).first()
    return tuple(row) if row is not None else None


def _turn(ctx: Context, session_id: int) -> Turn:
    with session_scope(ctx.engine) as db:
        return db.exec(select(Turn).where(Turn.session_id == session_id).order_by(col(Turn.id).desc())).first()  # type: ignore[return-value]


class CountingRunner:
    """A runner that counts its runs and works until halted or released."""

    def __init__(self) -> None:
        self.runs: list[int] = []
        self.release = threading.Event()
        self.halted: set[int] = set()

    def run(self, request: TurnRequest) -> TurnResult:
        self.runs.append(request.turn_id)
        self.release.wait(10)
        if request.turn_id in self.halted:
            return TurnResult(Outcome.HALTED)
        return TurnResult(Outcome.SUCCESS, output="ok")

    def halt(self, turn_id: int) -> bool:
        self.halted.add(turn_id)
        self.release.set()
        return True


def _host(ctx: Context, runner: CountingRunner) -> TurnHost:
    pool = LeasedPool(ThreadWorkerPool(runner, 2), ctx.engine, "worker-1", LEASE, ctx.clock.now)
    return TurnHost(ctx, pool, "worker-1", LEASE, ctx.clock.now)


def test_a_start_defers_its_job_in_its_own_transaction_and_leaves_the_lease_to_the_worker(queue_ctx) -> None:  # type: ignore[no-untyped-def]
    ctx, workers = queue_ctx
    sid = new(ctx, prompt="go")
    assert submit_turn(ctx, sid, "go").outcome == "started"
    turn = _turn(ctx, sid)
    assert (turn.owner, turn.lease_expires_at) == (None, None)  # no lease runs out while it waits for a worker
    assert _job(ctx, turn.job_id) == ("todo", f"session:{sid}", "turns", {"turn_id": turn.id}, False)
    assert workers.submitted == []  # nothing runs in the deciding process
    assert recover_lost_turns(ctx) == 0  # a turn waiting in the queue is not lost

    # A decision that rolls back takes its job with it.
    other = new(ctx, prompt="undone")
    before = _count_jobs(ctx)
    with pytest.raises(RuntimeError), session_scope(ctx.engine) as db:
        start(Work(db, ctx, ctx.clock.now()), lock(db, other), TurnAttempt("undone"))
        raise RuntimeError("the decision failed after the start")
    assert _count_jobs(ctx) == before


def _count_jobs(ctx: Context) -> int:
    with ctx.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM procrastinate_jobs")).scalar() or 0)


def test_a_job_delivered_twice_runs_its_turn_once_and_reports_through_completion(queue_ctx) -> None:  # type: ignore[no-untyped-def]
    ctx, _workers = queue_ctx
    sid = new(ctx, prompt="once")
    submit_turn(ctx, sid, "once")
    turn = _turn(ctx, sid)
    runner = CountingRunner()
    host = _host(ctx, runner)
    runner.release.set()
    assert host.run(turn.id or 0, lambda: None) == "done"
    assert host.run(turn.id or 0, lambda: None) == "not claimed"  # a second delivery of the same job
    assert runner.runs == [turn.id]
    done = _turn(ctx, sid)
    assert (done.status, done.outcome, done.owner) == ("done", "success", "worker-1")
    assert row(ctx, sid).status == "done"


def test_an_archive_cancels_a_queued_job_and_halts_a_running_one_through_the_abort(queue_ctx) -> None:  # type: ignore[no-untyped-def]
    ctx, _workers = queue_ctx
    queued, running = new(ctx, prompt="queued"), new(ctx, prompt="running")
    submit_turn(ctx, queued, "queued")
    submit_turn(ctx, running, "running")

    archive(ctx, queued)  # no worker took it: cancelled in the archive's transaction, reported HALTED
    turn = _turn(ctx, queued)
    assert (turn.status, turn.outcome) == ("halted", "halted")
    assert _job(ctx, turn.job_id)[0] == "cancelled"  # type: ignore[index]

    runner = CountingRunner()
    host = _host(ctx, runner)
    turn = _turn(ctx, running)
    asked: list[AbortReason | None] = [None]
    ran = threading.Thread(target=lambda: asked.append(host.run(turn.id or 0, lambda: asked[0])))  # type: ignore[func-returns-value]
    ran.start()
    _until(lambda: runner.runs == [turn.id])
    archive(ctx, running)  # another process decides it: the job is asked to stop
    assert _job(ctx, turn.job_id)[4] is True  # type: ignore[index]
    asked[0] = AbortReason.USER_REQUEST  # what procrastinate's worker hears from the abort NOTIFY
    ran.join(10)
    assert asked[-1] == "halted" and turn.id in runner.halted
    assert (_turn(ctx, running).status, row(ctx, running).status) == ("halted", "archived")


def test_a_job_a_dead_worker_took_before_it_claimed_the_turn_comes_back_through_the_sweep(queue_ctx) -> None:  # type: ignore[no-untyped-def]
    ctx, _workers = queue_ctx
    sid = new(ctx, prompt="orphan")
    submit_turn(ctx, sid, "orphan")
    turn = _turn(ctx, sid)
    with ctx.engine.begin() as conn:  # a worker fetched it and died at once: no worker row beats for it
        conn.execute(
            text("UPDATE procrastinate_jobs SET status = 'doing', worker_id = NULL WHERE id = :i"), {"i": turn.job_id}
        )
    assert recover_lost_turns(ctx) == 1
    assert _job(ctx, turn.job_id)[0] == "failed"  # type: ignore[index]  # ended, never retried
    [first] = _turns(ctx, sid)
    assert (first.status, first.outcome) == ("failed", "interrupted")
    assert row(ctx, sid).hold_reason == "interrupted"  # its prompt is held, due now: the next attempt is a new turn


def _turns(ctx: Context, session_id: int) -> list[Turn]:
    with session_scope(ctx.engine) as db:
        return list(db.exec(select(Turn).where(Turn.session_id == session_id)).all())


def _until(what: Any, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
