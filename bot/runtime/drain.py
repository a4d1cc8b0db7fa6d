"""A graceful stop for `pacer serve`: on SIGTERM (a Fly deploy, `docker stop`) no turn starts
here any more, the turns running here get PACER_DRAIN_SECONDS to finish, and the rest are handed
over rather than lost.

uvicorn stops taking requests first, then runs the app's shutdown, which calls `drain` before the
scheduler stops and the leader lock is released. From then on:

  * the scheduler's alarms are paused, so no re-check, sweep or schedule starts a turn here;
  * a turn the engine still starts (a finished turn's queue pass gives its slot away) is not run
    here: its row stays `running` and it is handed over below;
  * running turns finish and report as usual, until the deadline;
  * past it, `scheduler.engine.lifecycle.hand_over` holds each unfinished turn's prompt again, due now,
    as recovery after a crash would, and only then are the agents stopped, so their late reports
    are ignored and the next leader runs each turn once.

PACER_DRAIN_SECONDS must stay under the platform's kill timeout (fly.toml's `kill_timeout`),
or the machine is killed before the hand-over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from scheduler.engine.lifecycle import hand_over
from scheduler.ports import TurnRequest, TurnResult

log = logging.getLogger("pacer.drain")

POLL_SECONDS = 0.2


class Draining:
    """The worker pool while the process stops: turns already here run on, new ones are kept
    back for the hand-over."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.kept_back: list[int] = []
        self._lock = threading.Lock()

    def submit(self, request: TurnRequest, on_done: Callable[[TurnResult], None]) -> None:
        with self._lock:
            self.kept_back.append(request.turn_id)
        log.info("draining: turn %s of session #%s is left for the next leader", request.turn_id, request.session_id)

    def halt(self, turn_id: int) -> bool:
        return bool(self.pool.halt(turn_id))

    def running(self) -> list[int]:
        with self._lock:
            kept = list(self.kept_back)
        return [*_running(self.pool), *kept]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)


def _running(pool: Any) -> list[int]:
    running = getattr(pool, "running", None)
    return list(running()) if running is not None else []


def drain(pacer: Any, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> int:
    """Stop starting turns, let the running ones finish for up to `seconds`, hand the rest
    over. Returns how many turns were handed over."""
    scheduler = pacer.scheduler
    if scheduler is not None and scheduler.running:
        scheduler.pause()
    ctx = pacer.ctx
    pool = ctx.ports.workers if isinstance(ctx.ports.workers, Draining) else Draining(ctx.ports.workers)
    ctx.ports.workers = pool
    deadline = clock() + seconds
    waiting = _running(pool.pool)
    if waiting:
        log.info("draining: %s turn(s) running; waiting up to %.0f s for them to finish", len(waiting), seconds)
    while _running(pool.pool) and clock() < deadline:
        time.sleep(POLL_SECONDS)
    unfinished = pool.running()
    if not unfinished:
        return 0
    given = hand_over(ctx, unfinished)
    for turn_id in _running(pool.pool):
        pool.halt(turn_id)  # its report finds the turn handed over and changes nothing
    log.warning("draining: %s turn(s) did not finish in %.0f s; handed to the next leader (%s held again, due now)",
                len(unfinished), seconds, given)
    return given


__all__ = ["Draining", "drain"]
