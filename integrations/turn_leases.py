"""The worker pool with a heartbeat: every turn this process holds keeps its lease.

    pool = LeasedPool(ThreadWorkerPool(runner, 12), engine, owner, timedelta(seconds=30), clock)
    pool.submit(request, on_done)     # as the inner pool; the turn's lease is renewed from now on,
                                      # and the agent's session id recorded as soon as it says it
    pool.shutdown(wait=True)          # the heartbeat stops with the pool

Every third of a lease, one UPDATE renews the leases of the turns this process has accepted and
not yet reported (`scheduler.engine.leases.renew`): so a turn queued behind busy workers keeps its
lease as well as a running one, and a turn this process has lost track of is not renewed and
comes back through recovery. A turn the renewal does not return was recovered elsewhere after
its lease ran out (this process stalled past it): it is halted here, so it runs once.

The runner is given `request.on_agent_session`: the agent's session id goes onto the session's
row as soon as the agent states it (`scheduler.engine.leases.record_agent_session`, while this process
still owns the turn), wherever the turn runs, `pacer serve` or `pacer worker`. A turn whose
process dies before its result then re-runs with --resume rather than start the work over.

A process that cannot renew for two thirds of a lease (its database unreachable) halts every
turn it holds: by the time the lease runs out and another process recovers a turn, its first run
has stopped, a third of a lease before, which is the margin for the two machines' clocks.

Given a `progress` book, the runner is given `request.on_progress` as well: what the agent is
doing goes onto the turn's row as it changes, and out to the notifiers (`integrations.turn_progress`).
And `request.inbox`: what people say to the session while the turn runs, for a runner whose agent
takes it mid-turn (`integrations.turn_inbox`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import Engine

from integrations.turn_inbox import DbInbox
from integrations.turn_progress import ProgressBook
from scheduler.engine.leases import record_agent_session, renew
from scheduler.ports import TurnRequest, TurnResult

log = logging.getLogger("pacer.leases")


class LeasedPool:
    """TurnWorkers port (scheduler.context) over another pool, renewing its turns' leases."""

    def __init__(
        self, pool: Any, engine: Engine, owner: str, lease: timedelta, now: Callable[[], datetime],
        *, progress: ProgressBook | None = None,
    ) -> None:
        self.pool = pool
        self.progress = progress
        self.engine = engine
        self.owner = owner
        self.lease = lease
        self.now = now
        self._held: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def submit(self, request: TurnRequest, on_done: Callable[[TurnResult], None]) -> None:
        turn_id = request.turn_id

        def done(result: TurnResult) -> None:
            if self.progress is not None:
                self.progress.ended(turn_id)
            try:
                on_done(result)
            finally:
                with self._lock:
                    self._held.discard(turn_id)

        with self._lock:
            self._held.add(turn_id)
        try:
            on_progress = self.progress.teller(turn_id) if self.progress is not None else None
            on_agent_session = partial(self.record_agent_session, turn_id)
            inbox = DbInbox(self.engine, request.session_id, turn_id, self.now)  # people's messages, mid-turn
            told = replace(request, on_agent_session=on_agent_session, on_progress=on_progress, inbox=inbox)
            self.pool.submit(told, done)
        except BaseException:
            with self._lock:
                self._held.discard(turn_id)
            raise
        self._beat_in_background()

    def halt(self, turn_id: int) -> bool:
        return bool(self.pool.halt(turn_id))

    def record_agent_session(self, turn_id: int, agent_session_id: str) -> None:
        """What the runner calls when the agent of `turn_id` names its session."""
        if record_agent_session(self.engine, turn_id, self.owner, agent_session_id):
            log.info("turn %s: the agent's session is %s; a re-run resumes it", turn_id, agent_session_id)

    def running(self) -> list[int]:
        """The turns accepted here and not yet reported: the ones whose leases this pool renews."""
        with self._lock:
            return sorted(self._held)

    def beat(self) -> list[int]:
        """Renew every held turn's lease once; halt and return the ones found taken away."""
        held = self.running()
        renewed = renew(self.engine, self.owner, held, self.now() + self.lease)
        lost = []
        for turn_id in held:
            if turn_id in renewed or turn_id not in self.running():
                continue  # renewed, or reported between the read and the renewal
            if self.pool.halt(turn_id):
                log.warning("turn %s lost its lease to recovery elsewhere; halted here so it runs once", turn_id)
                lost.append(turn_id)
        return lost

    def shutdown(self, wait: bool = True, **options: Any) -> None:
        self._stop.set()
        self.pool.shutdown(wait, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)

    def _beat_in_background(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._heartbeat, name="pacer-lease", daemon=True)
        self._thread.start()

    def _heartbeat(self) -> None:
        interval = self.lease.total_seconds() / 3
        renewed_at = time.monotonic()
        while not self._stop.wait(interval):
            try:
                self.beat()
                renewed_at = time.monotonic()
            except Exception:  # one missed beat is retried at the next, inside the lease
                log.exception("renewing turn leases failed")
                if time.monotonic() - renewed_at >= 2 * interval:
                    self._stand_down()

    def _stand_down(self) -> None:
        held = self.running()
        halted = [turn_id for turn_id in held if self.pool.halt(turn_id)]
        if halted:
            log.error("turn leases could not be renewed for two thirds of a lease; halted turns %s "
                      "so none runs beside its recovery elsewhere", halted)


__all__ = ["LeasedPool"]
