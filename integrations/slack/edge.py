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


class SlackEdge:
    """The runtime plus a bounded pool for work done after the ack."""

    def __init__(self, pacer: Pacer, *, work_threads: int = DEFAULT_WORK_THREADS, intake: Callable[[Pacer, dict[str, Any]], None] | None = None) -> None:
        self.pacer = pacer
        # Where a fresh Slack message goes; None: `bot.intake.slack_message`, found at call time.
        self.intake = intake
        self._pool = ThreadPoolExecutor(max_workers=work_threads, thread_name_prefix="slack-work")
        self._pending: set[Future[Any]] = set()
        self._lock = threading.Lock()

    def submit(self, what: str, func: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run func(*args) after the ack; an exception is logged with `what`, never raised."""

        def guarded() -> Any:
            try:
                return func(*args)
            except Exception:
                log.exception("slack: %s failed", what)
                return None

        future = self._pool.submit(guarded)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait for the work submitted so far; True when all of it finished in time."""
        with self._lock:
            pending = set(self._pending)
        if not pending:
            return True
        _done, not_done = wait(pending, timeout=timeout)
        return not not_done

    def close(self, timeout: float = 10.0) -> None:
        """Finish what was acked (Slack will not resend it), then stop the pool."""
        self.drain(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)
