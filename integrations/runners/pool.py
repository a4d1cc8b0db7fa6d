"""The worker pool: turns executed on `PACER_AGENT_WORKERS` threads, each result reported once.

    pool = ThreadWorkerPool(build_runner(settings), settings.agent_workers)
    pool.submit(request, on_done)     # returns at once; on_done(result) later, on a pool thread
    pool.halt(turn_id)                # queued: never runs; running: the runner stops it
    pool.shutdown(wait=True)          # the app lifespan's last word

The promise the turn engine builds on: `on_done` is called exactly once per accepted turn. A
runner that raises becomes a FAILED_RETRYABLE result naming the exception (and a logged trace),
an `on_done` that raises is logged and never called again, and a turn halted while still queued
reports HALTED without running.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from scheduler.errors import InvalidInput
from scheduler.ports import Outcome, Runner, TurnRequest, TurnResult
from templates import error_text, render

log = logging.getLogger("pacer.workers")

# A turn a worker has just picked up may not be registered with its runner yet; a halt then
# retries for this long rather than report "not running" for a turn that is about to run.
HALT_CATCH_UP_SECONDS = 1.0
MESSAGE_CHARS = 500


@dataclass
class _Entry:
    request: TurnRequest
    on_done: Callable[[TurnResult], None]
    future: Future[None] | None = None
    started: bool = False
    halt_requested: bool = False
    reported: bool = False
    delivery: threading.Thread | None = field(default=None, repr=False)


class ThreadWorkerPool:
    """TurnWorkers port (scheduler.context) over a ThreadPoolExecutor and one Runner."""

    def __init__(self, runner: Runner, workers: int) -> None:
        if workers < 1:
            raise InvalidInput(error_text("runners/workers", value=workers), field="workers")
        self.runner = runner
        self.workers = workers
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pacer-turn")
        self._lock = threading.Lock()
        self._entries: dict[int, _Entry] = {}
        self._deliveries: list[threading.Thread] = []
        self._closed = False

    def submit(self, request: TurnRequest, on_done: Callable[[TurnResult], None]) -> None:
        """Schedule the turn. Raises InvalidInput for a turn id already in the pool and
        RuntimeError after shutdown; otherwise on_done(result) follows exactly once."""
        entry = _Entry(request, on_done)
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is shut down; no turn can be submitted")
            if request.turn_id in self._entries:
                raise InvalidInput(error_text("runners/turn_in_pool", turn_id=request.turn_id), field="turn_id")
            self._entries[request.turn_id] = entry
            entry.future = self._executor.submit(self._execute, entry)

    def halt(self, turn_id: int) -> bool:
        """Stop a queued or running turn; its on_done then reports HALTED. False if not here."""
        with self._lock:
            entry = self._entries.get(turn_id)
            if entry is None or entry.reported:
                return False
            entry.halt_requested = True
            started = entry.started
        if not started:
            assert entry.future is not None
            if entry.future.cancel():
                self._deliver_elsewhere(entry, self._halted(entry.request))
            # Otherwise a worker is picking it up right now and will see halt_requested.
            return True
        deadline = time.monotonic() + HALT_CATCH_UP_SECONDS
        while not self.runner.halt(turn_id):
            with self._lock:
                finished = entry.reported or (entry.future is not None and entry.future.done())
            if finished or time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def active(self) -> int:
        """Turns accepted and not yet reported (queued or running)."""
        with self._lock:
            return len(self._entries)

    def running(self) -> list[int]:
        """The ids of the turns accepted and not yet reported (queued or running)."""
        with self._lock:
            return list(self._entries)

    def shutdown(self, wait: bool = True, *, halt: bool = False) -> None:
        """Stop accepting turns; with `halt`, halt every turn first. Queued turns still run
        (and report) unless halted, so a graceful stop loses no callback."""
        with self._lock:
            self._closed = True
            turn_ids = list(self._entries)
        if halt:
            for turn_id in turn_ids:
                self.halt(turn_id)
        self._executor.shutdown(wait=wait)
        if wait:
            with self._lock:
                deliveries = list(self._deliveries)
            for thread in deliveries:
                thread.join()

    def _execute(self, entry: _Entry) -> None:
        with self._lock:
            skip = entry.halt_requested
            entry.started = True
        if skip:
            self._deliver(entry, self._halted(entry.request))
            return
        try:
            result = self.runner.run(entry.request)
        except BaseException as exc:  # any escape would lose the callback
            log.exception("runner raised on turn %s of session %s", entry.request.turn_id, entry.request.session_id)
            message = str(exc)[:MESSAGE_CHARS] or "(no message)"
            error = render("text/runner_error.j2", kind="exception", type=type(exc).__name__, message=message)
            result = TurnResult(
                outcome=Outcome.FAILED_RETRYABLE,
                error=error,
                agent_session_id=entry.request.agent_session_id,
                extra={"exception": type(exc).__name__},
            )
        self._deliver(entry, result)

    def _deliver(self, entry: _Entry, result: TurnResult) -> None:
        with self._lock:
            if entry.reported:
                return
            entry.reported = True
            self._entries.pop(entry.request.turn_id, None)
        try:
            entry.on_done(result)
        except Exception:
            log.exception("on_done failed for turn %s; not called again", entry.request.turn_id)

    def _deliver_elsewhere(self, entry: _Entry, result: TurnResult) -> None:
        # on_done runs off the halting caller's thread, as the port promises: the caller may
        # hold a database transaction that on_done would need.
        thread = threading.Thread(target=self._deliver, args=(entry, result), daemon=True, name="pacer-turn-halted")
        with self._lock:
            self._deliveries = [t for t in self._deliveries if t.is_alive()] + [thread]
        thread.start()

    @staticmethod
    def _halted(request: TurnRequest) -> TurnResult:
        return TurnResult(
            outcome=Outcome.HALTED,
            agent_session_id=request.agent_session_id,
            error=render("text/runner_error.j2", kind="halted"),
            extra={"ran": False},
        )


__all__ = ["ThreadWorkerPool"]
