"""A thread pool that can say when everything submitted so far has finished: the work Slack's and
GitHub's edges do after they answer, and the sticky status comments, all drain on shutdown.

Each task runs in a copy of its submitter's contextvars, so the work done after an answer logs
with that request's id and that session's id, as the request itself did."""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any


def run_guarded(log: logging.Logger, what: str, func: Callable[..., Any], *args: Any) -> Any:
    """func(*args) for work nobody waits on: an exception is logged as "<what> failed", never raised."""
    try:
        return func(*args)
    except Exception:
        log.exception("%s failed", what)
        return None


class TrackedPool(ThreadPoolExecutor):
    """A thread pool that can say when everything submitted so far has finished."""

    def __init__(self, max_workers: int, name: str) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=name)
        self._pending: set[Future[Any]] = set()
        self._pending_lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = super().submit(contextvars.copy_context().run, fn, *args, **kwargs)
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
