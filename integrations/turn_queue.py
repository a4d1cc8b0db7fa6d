"""Turns on worker machines: procrastinate on the PostgreSQL database Pacer already uses.

    app = build_app(conninfo)                                  # the procrastinate App, `run_turn` on it
    ctx.ports.dispatcher = TurnQueue(app, stalled_after=lease)       # records.start defers on its transaction
    app.run_worker(queues=[QUEUE], additional_context={HOST: TurnHost(...)})   # `pacer worker`

A started turn's job is deferred on the connection of the transaction that decides the start
(`TurnQueue.enqueue`), so the turn row and its job commit together or not at all. A worker runs
`run_turn(turn_id)` on a thread: it claims the turn (`leases.claim`: an owner and a lease, only
while nobody owns it, so a job delivered twice runs its turn once), runs it on the worker's own
`LeasedPool` (the pool `pacer serve` uses: same runner, same lease renewal, same report through
the `turn_done` target, `completion.complete_turn`), and each second asks procrastinate whether
the job should stop: a halt decided on any process (`TurnQueue.halt`) halts the runner, which
reports HALTED; a worker shutting down hands the turn over (`lifecycle.hand_over`) first.

An attempt is a turn row, never a job: a turn whose lease ran out is given back by the leader's
lease sweep (a new turn row and a new job follow), its job is ended (`TurnQueue.end`), and
procrastinate's `retry_job` is never used. A job a dead worker still holds keeps its session's
lock, so each sweep ends the jobs of workers that stopped beating (`TurnQueue.stalled`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from procrastinate import App, JobContext, PsycopgConnector
from procrastinate.job_context import AbortReason
from sqlmodel import Session as DBSession

from scheduler import alarms
from scheduler.context import Context
from scheduler.engine.leases import claim
from scheduler.engine.lifecycle import hand_over
from scheduler.engine.records import turn_request
from scheduler.ports import TurnResult
from scheduler.store.db import session_scope

log = logging.getLogger("pacer.turn_queue")

QUEUE = "turns"
TASK = "run_turn"
HOST = "pacer"  # the key of the TurnHost in a worker's additional context
ABORT_POLL_SECONDS = 1.0


def lock_for(session_id: int) -> str:
    """One job of a session runs at a time, whichever worker holds it."""
    return f"session:{session_id}"


def run_turn(job: JobContext, turn_id: int) -> str:
    """The task every worker runs: the turn `turn_id`, through the worker's TurnHost."""
    host: TurnHost = job.additional_context[HOST]
    return host.run(turn_id, job.abort_reason)


def build_app(conninfo: str) -> App:
    """procrastinate's App on `conninfo` (a libpq URL), with `run_turn` registered."""
    app = App(connector=PsycopgConnector(conninfo=conninfo))
    app.task(name=TASK, queue=QUEUE, pass_context=True)(run_turn)
    return app


def _driver(db: DBSession) -> Any:
    """The psycopg connection under the ORM session's transaction."""
    return db.connection().connection.driver_connection


class TurnQueue:
    """The TurnDispatcher port (scheduler.context) over procrastinate."""

    def __init__(self, app: App, *, stalled_after: timedelta) -> None:
        self.app = app
        self.stalled_after = stalled_after

    def enqueue(self, db: DBSession, turn_id: int, session_id: int) -> int:
        deferrer = self.app.configure_task(TASK, queue=QUEUE, lock=lock_for(session_id), connection=_driver(db))
        return deferrer.defer(turn_id=turn_id)

    def halt(self, db: DBSession, job_id: int) -> bool:
        # The row lock keeps a worker from taking the job between the read and the cancel
        # (procrastinate fetches with SKIP LOCKED).
        status = _status(db, job_id)
        self.app.job_manager.cancel_job_by_id(job_id, abort=True, connection=_driver(db))
        return status == "todo"

    def end(self, db: DBSession, job_id: int) -> None:
        # A job still queued is cancelled; a running one is asked to stop (its worker's heartbeat
        # has halted the turn already, or its worker is dead and `stalled` ends the job).
        if _status(db, job_id) in ("todo", "doing"):
            self.app.job_manager.cancel_job_by_id(job_id, abort=True, connection=_driver(db))

    def stalled(self, db: DBSession) -> list[int]:
        with _driver(db).cursor() as cursor:
            cursor.execute(
                # A worker stops beating while it drains on SIGTERM, and its turns still run
                # then: a job whose turn holds a live lease is left to its worker.
                "SELECT j.id FROM procrastinate_jobs j LEFT JOIN procrastinate_workers w ON w.id = j.worker_id "
                "WHERE j.status = 'doing' AND j.queue_name = %s "
                "AND (w.id IS NULL OR w.last_heartbeat < now() - make_interval(secs => %s)) "
                "AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.job_id = j.id AND t.status = 'running' AND "
                "t.lease_expires_at > now()) "
                "ORDER BY j.id FOR UPDATE OF j SKIP LOCKED",
                (QUEUE, self.stalled_after.total_seconds()),
            )
            ended = [int(row[0]) for row in cursor.fetchall()]
            for job_id in ended:
                cursor.execute("SELECT procrastinate_finish_job_v1(%s, 'failed', false)", (job_id,))
        if ended:
            log.warning(
                "jobs %s of workers that stopped beating were ended; their turns come back through the lease sweep",
                ended,
            )
        return ended


def _status(db: DBSession, job_id: int) -> str | None:
    with _driver(db).cursor() as cursor:
        cursor.execute("SELECT status FROM procrastinate_jobs WHERE id = %s FOR UPDATE", (job_id,))
        row = cursor.fetchone()
    return str(row[0]) if row is not None else None


@dataclass
class TurnHost:
    """What a worker process runs turns with: its Context (reports, and the next turns a report
    starts) and its leased pool, under this process's owner id."""

    ctx: Context
    pool: Any  # integrations.turn_leases.LeasedPool
    owner: str
    lease: timedelta
    now: Callable[[], datetime]

    def run(self, turn_id: int, abort_reason: Callable[[], AbortReason | None]) -> str:
        if not claim(self.ctx.engine, turn_id, self.owner, self.now() + self.lease):
            log.info("turn %s is owned already or has ended; its job runs nothing", turn_id)
            return "not claimed"
        with session_scope(self.ctx.engine) as db:
            request = turn_request(db, turn_id)
        if request is None:
            return "not found"
        done = threading.Event()

        def report(result: TurnResult) -> None:
            try:
                self.ctx.run_job(alarms.TURN_DONE, turn_id, result)
            finally:
                done.set()

        self.pool.submit(request, report)
        halted = handed = False
        while True:
            reason = abort_reason()
            if reason is AbortReason.SHUTDOWN and not handed:
                # This worker stops: the turn goes back as a crash's would, before its agent is
                # stopped, so the late HALTED report finds it ended and changes nothing.
                hand_over(self.ctx, [turn_id])
                handed = True
            if reason is not None and not halted:
                halted = bool(self.pool.halt(turn_id))
            if done.wait(ABORT_POLL_SECONDS):
                return "halted" if halted else "done"


__all__ = ["ABORT_POLL_SECONDS", "HOST", "QUEUE", "TASK", "TurnHost", "TurnQueue", "build_app", "lock_for", "run_turn"]
