"""A queue pass asked for while one runs is not dropped: it runs once more after, however many
requests came meanwhile (APScheduler alone skipped them: "maximum number of running instances
reached"). The real APScheduler scheduler and its SQLAlchemy job store, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from apscheduler.events import EVENT_JOB_MAX_INSTANCES
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import Engine

from integrations.apscheduler_deferrer import APSchedulerDeferrer, build_scheduler
from scheduler.context import QUEUE_PASS_JOB

# The stand-in pass: APScheduler pickles a reference to a module-level function, so its state is
# module-level too. The first run waits for `release`; every run is counted.
runs: list[float] = []
started = threading.Event()
release = threading.Event()


def slow_pass() -> None:
    runs.append(time.monotonic())
    started.set()
    if len(runs) == 1:
        release.wait(10)


def quick_tick() -> None:
    runs.append(time.monotonic())
    started.set()
    release.wait(10)


def until(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        threading.Event().wait(0.02)
    return True


@pytest.fixture
def aps(any_engine: Engine) -> Iterator[BackgroundScheduler]:
    runs.clear()
    started.clear()
    release.clear()
    scheduler = build_scheduler(any_engine, threads=4)
    scheduler.start()
    yield scheduler
    release.set()
    scheduler.shutdown(wait=True)


def test_requests_made_while_a_pass_runs_make_exactly_one_more_pass_after_it(aps: BackgroundScheduler) -> None:
    deferrer = APSchedulerDeferrer(aps)
    deferrer.schedule(QUEUE_PASS_JOB, datetime.now(UTC), slow_pass)
    assert started.wait(5)
    for _ in range(3):  # three requests while the first pass runs
        deferrer.schedule(QUEUE_PASS_JOB, datetime.now(UTC), slow_pass)
        assert until(lambda: aps.get_job(QUEUE_PASS_JOB) is None), "the scheduler never took the request"
    assert len(runs) == 1  # none ran beside the running pass
    release.set()
    assert until(lambda: len(runs) >= 2), "the requests made during the pass were dropped"
    executor = aps._lookup_executor("default")
    assert until(lambda: not executor._instances), (dict(executor._instances), runs)
    assert len(runs) == 2 and aps.get_jobs() == []


def test_a_periodic_job_still_skips_a_run_that_overlaps_the_last(aps: BackgroundScheduler) -> None:
    skipped: list[object] = []
    aps.add_listener(skipped.append, EVENT_JOB_MAX_INSTANCES)
    aps.add_job(quick_tick, "interval", seconds=0.2, id="tick")
    assert started.wait(5)
    assert until(lambda: len(skipped) >= 3), "APScheduler never came round to the tick while it ran"
    aps.remove_job("tick")
    release.set()
    executor = aps._lookup_executor("default")
    assert until(lambda: not executor._instances)
    assert len(runs) == 1  # the overlapping ticks were skipped, not queued behind the first
