"""The Deferrer port on APScheduler 3.x with its SQLAlchemy job store in Pacer's own database,
so a re-check survives a restart. One scheduler per job store: only the leader runs this.

Re-checks never misfire-drop (`misfire_grace_time=None`) and coalesce; ids are stable
(`recheck:<session id>`) and re-arming replaces. An alarm due while its previous run still runs
runs once more after it, never dropped (`RerunningExecutor`). Job arguments are pickled, so only ids travel,
and the callable is a module-level function found by its import path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from apscheduler.executors.base import MaxInstancesReachedError
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import STATE_STOPPED
from apscheduler.triggers.date import DateTrigger
from sqlalchemy import Engine

log = logging.getLogger(__name__)

JOB_TABLE = "apscheduler_jobs"


class StoppingScheduler(BackgroundScheduler):  # type: ignore[misc]  # APScheduler 3 ships no types
    """APScheduler's background scheduler, made safe to stop right after an alarm was armed.

    `shutdown` marks the scheduler stopped, then shuts the executors under the job-store lock.
    A pass that alarm woke either reaches the lock after them — and would hand the due job to a
    shut executor — or already holds it and, seeing the stopped state, looks for the fired
    one-shot job among the pending ones and raises; either way the scheduler's thread dies with a
    traceback. Here such a pass stands down: the alarm stays in the job store for the next
    leader, and running it twice is harmless (every alarm target re-reads its rows)."""

    def _process_jobs(self) -> float | None:
        with self._jobstores_lock:
            if self.state == STATE_STOPPED:
                return None
            try:
                return super()._process_jobs()  # type: ignore[no-any-return]
            except JobLookupError:
                if self.state == STATE_STOPPED:
                    return None
                raise


class RerunningExecutor(ThreadPoolExecutor):  # type: ignore[misc]
    """APScheduler's thread pool, except that a one-shot alarm that comes due while its previous
    run still runs is not dropped ("skipped: maximum number of running instances reached"): it
    runs once more when that run ends, however many came due meanwhile.

    A queue pass asked for while one runs is asked for because something changed that the
    running pass may have read before the change; dropping it left that change unseen until the
    next unrelated request. A periodic job comes round again by itself, so an overlapping run of
    one is still skipped, as APScheduler does."""

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers)
        self._again: dict[str, tuple[Any, list[datetime]]] = {}

    def submit_job(self, job: Any, run_times: list[datetime]) -> None:
        assert self._lock is not None, "the executor is not started"
        with self._lock:
            if self._instances[job.id] >= job.max_instances:
                if not isinstance(job.trigger, DateTrigger):
                    raise MaxInstancesReachedError(job)
                self._again[job.id] = (job, run_times)  # the latest request stands for all of them
                return
            # Counted before the pool is handed it: a run that ends at once reports itself done
            # on this very thread (the lock is re-entrant), and must find itself counted.
            self._instances[job.id] += 1
            try:
                self._do_submit_job(job, run_times)
            except BaseException:
                self._instances[job.id] -= 1
                if not self._instances[job.id]:
                    del self._instances[job.id]
                raise

    def _run_job_success(self, job_id: str, events: list[Any]) -> None:
        super()._run_job_success(job_id, events)
        self._run_again(job_id)

    def _run_job_error(self, job_id: str, exc: BaseException, traceback: Any = None) -> None:
        super()._run_job_error(job_id, exc, traceback)
        self._run_again(job_id)

    def _run_again(self, job_id: str) -> None:
        with self._lock:
            waiting = self._again.pop(job_id, None)
            if waiting is None:
                return
            try:
                self.submit_job(*waiting)
            except RuntimeError:  # the pool is shut down: the scheduler stopped, the rows remain
                log.info(
                    "alarm %s was due again as the scheduler stopped; the next leader's sweeps find its work", job_id
                )


def build_scheduler(engine: Engine, *, threads: int = 4) -> BackgroundScheduler:
    return StoppingScheduler(
        jobstores={"default": SQLAlchemyJobStore(engine=engine, tablename=JOB_TABLE)},
        executors={"default": RerunningExecutor(threads)},
        job_defaults={"misfire_grace_time": None, "coalesce": True, "max_instances": 1},
        timezone="UTC",
    )


class APSchedulerDeferrer:
    def __init__(self, scheduler: BackgroundScheduler) -> None:
        self.scheduler = scheduler

    def schedule(self, job_id: str, at: datetime, func: Callable[..., Any], *args: Any) -> None:
        options: dict[str, Any] = {
            "trigger": DateTrigger(run_date=at, timezone="UTC"), "args": list(args), "id": job_id,
            "replace_existing": True, "misfire_grace_time": None, "coalesce": True,
        }
        try:
            self.scheduler.add_job(func, **options)
        except JobLookupError:
            # In a shared job store, the leader can fire and remove the alarm between APScheduler's
            # failed insert and its replacing update: the id is free again, so the insert now holds.
            self.scheduler.add_job(func, **options)

    def cancel(self, job_id: str) -> bool:
        try:
            self.scheduler.remove_job(job_id)
        except JobLookupError:
            return False
        return True

    def next_run(self, job_id: str) -> datetime | None:
        job = self.scheduler.get_job(job_id)
        return job.next_run_time if job is not None else None
