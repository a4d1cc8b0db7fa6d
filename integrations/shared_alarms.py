"""Alarms armed on any process, fired by the leader alone.

Every `pacer serve` starts its APScheduler scheduler, the followers' paused (`start(paused=True)`):
a paused scheduler writes an armed alarm to the shared job store at once, where a scheduler that
was never started would keep it in memory until a `start` that never comes. Only the leader's
scheduler runs, so only the leader fires them.

The leader's scheduler sleeps until the earliest alarm it saw in the store when it last looked;
APScheduler 3.x does not poll the store, so an alarm another process writes, due sooner (a queue
pass, due now), would wait for that wake-up. On PostgreSQL a follower therefore sends a
NOTIFY after each alarm it arms, and the leader LISTENs and wakes its scheduler, which reads the
store again: a queue pass requested on a follower runs on the leader within a round trip. SQLite
is one machine with one serving process; an alarm its other processes (the console) arm is found
at the leader's next own alarm, the lease sweep every half lease at the latest.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from apscheduler.schedulers.base import STATE_RUNNING
from sqlalchemy import Engine, text

from scheduler.ports import Deferrer

log = logging.getLogger("pacer.alarms")

CHANNEL = "pacer_alarms"
RECONNECT_SECONDS = 2.0
POLL_SECONDS = 1.0  # how often the listener checks that it should still listen


class SharedDeferrer:
    """The Deferrer port over APScheduler's, telling the leader when a follower armed an alarm."""

    def __init__(self, deferrer: Deferrer, scheduler: Any, engine: Engine) -> None:
        self.deferrer = deferrer
        self.scheduler = scheduler
        self.engine = engine

    def schedule(self, job_id: str, at: datetime, func: Callable[..., Any], *args: Any) -> None:
        self.deferrer.schedule(job_id, at, func, *args)
        if self.scheduler.state != STATE_RUNNING:
            wake_leader(self.engine)

    def cancel(self, job_id: str) -> bool:
        return self.deferrer.cancel(job_id)

    def next_run(self, job_id: str) -> datetime | None:
        return self.deferrer.next_run(job_id)


def wake_leader(engine: Engine) -> None:
    """Tell the leading process that the job store changed (PostgreSQL; a no-op on SQLite)."""
    if engine.dialect.name != "postgresql":
        return
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": CHANNEL})
            conn.commit()
    except Exception:  # the leader still finds the alarm at its next wake-up
        log.exception("telling the leader about a new alarm failed")


class AlarmListener:
    """On the leader: LISTEN for followers' alarms and wake the scheduler for each."""

    def __init__(self, engine: Engine, wake: Callable[[], None]) -> None:
        self.engine = engine
        self.wake = wake
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.engine.dialect.name != "postgresql" or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._listen_until_stopped, name="pacer-alarms", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _listen_until_stopped(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except Exception:
                log.exception("listening for alarms armed elsewhere failed; reconnecting")
                self._stop.wait(RECONNECT_SECONDS)

    def _listen(self) -> None:
        import psycopg

        url = self.engine.url.set(drivername="postgresql")
        with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            self.wake()  # anything armed while no one listened
            while not self._stop.is_set():
                # A burst of notices becomes a few wake-ups: each reads the whole store, and the
                # scheduler coalesces wake-ups that arrive while it is reading.
                if any(True for _notice in conn.notifies(timeout=POLL_SECONDS, stop_after=1)):
                    self.wake()


__all__ = ["AlarmListener", "SharedDeferrer", "wake_leader"]
