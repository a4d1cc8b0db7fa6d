"""What every Slack listener needs besides Bolt's own arguments: the runtime and a work pool.

Bolt runs listeners on one executor and, with `process_before_response=False`, the request
thread waits on that executor until the listener calls `ack()`. If the same threads also built
answers (database reads, Web API calls), a burst of slow answers would delay every later ack past
Slack's 3 seconds. So listeners only ack and hand the real work to this separate pool.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from bot.runtime import Pacer

log = logging.getLogger("pacer.slack")

# Answer building is database-bound: a few threads saturate SQLite's single writer and stay well
# inside PostgreSQL's pool (10 + 20 overflow) alongside the HTTP and scheduler threads.
DEFAULT_WORK_THREADS = 8


# Listeners only ack and hand off, so these threads are busy for microseconds per request; 16
# absorbs a burst of slash commands without an ack ever queueing behind another.
DEFAULT_LISTENER_THREADS = 16


class TrackedPool(ThreadPoolExecutor):
    """A thread pool that can say when everything submitted so far has finished."""

    def __init__(self, max_workers: int, name: str) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=name)
        self._pending: set[Future[Any]] = set()
        self._pending_lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        with self._pending_lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: Future[Any]) -> None:
        with self._pending_lock:
            self._pending.discard(future)

    def drain(self, timeout: float) -> bool:
        with self._pending_lock:
            pending = set(self._pending)
        if not pending:
            return True
        _done, not_done = wait(pending, timeout=timeout)
        return not not_done


class SlackEdge:
    """The runtime, Bolt's listener pool (the ack path) and a bounded pool for work after the ack."""

    def __init__(
        self,
        pacer: Pacer,
        *,
        work_threads: int = DEFAULT_WORK_THREADS,
        listener_threads: int = DEFAULT_LISTENER_THREADS,
        intake: Callable[[Pacer, dict[str, Any]], None] | None = None,
    ) -> None:
        self.pacer = pacer
        # Where a fresh Slack message goes; None: `bot.intake.slack_message`, found at call time.
        self.intake = intake
        self.listeners = TrackedPool(listener_threads, "slack-listener")
        self._pool = TrackedPool(work_threads, "slack-work")

    def submit(self, what: str, func: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run func(*args) after the ack; an exception is logged with `what`, never raised."""

        def guarded() -> Any:
            try:
                return func(*args)
            except Exception:
                log.exception("slack: %s failed", what)
                return None

        return self._pool.submit(guarded)

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait for the listeners running now and the work they handed off; True when all of it
        finished in time. Listeners first: each hands its work off before it returns."""
        return self.listeners.drain(timeout) and self._pool.drain(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Finish what was acked (Slack will not resend it), then stop both pools."""
        self.drain(timeout)
        self.listeners.shutdown(wait=False, cancel_futures=True)
        self._pool.shutdown(wait=False, cancel_futures=True)
