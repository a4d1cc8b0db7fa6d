"""A thread pool that can say when everything submitted so far has finished: the work Slack's and
GitHub's edges do after they answer, and the sticky status comments, all drain on shutdown.
`InOrder` runs work on such a pool one at a time per key, in the order it was submitted.

Each task runs in a copy of its submitter's contextvars, so the work done after an answer logs
with that request's id and that session's id, as the request itself did."""

from __future__ import annotations

import contextvars
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
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


@dataclass(eq=False)
class _Task:
    keys: frozenset[str]
    run: Callable[[], Any]
    done: Future[Any] = field(default_factory=Future)


class InOrder:
    """Work on `pool` where two tasks that share a key run one after the other, in the order
    they were submitted, and tasks with no key in common run side by side.

    A task waits, holding no thread, until it is first in the line of every key it names; the
    task that finishes ahead of it hands it to the pool. The earliest task waiting is always
    first in all of its lines, so every line moves."""

    def __init__(self, pool: TrackedPool) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._lines: dict[str, deque[_Task]] = {}
        self._unfinished: set[Future[Any]] = set()

    def submit(self, keys: Iterable[str], fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        context = contextvars.copy_context()  # the submitter's, not that of the task it waits behind
        task = _Task(frozenset(keys), lambda: context.run(fn, *args))
        with self._lock:
            self._unfinished.add(task.done)
            for key in task.keys:
                self._lines.setdefault(key, deque()).append(task)
            ready = self._is_first(task)
        if ready:
            self._pool.submit(self._run, task)
        return task.done

    def _is_first(self, task: _Task) -> bool:
        return all(self._lines[key][0] is task for key in task.keys)

    def _run(self, task: _Task) -> None:
        try:
            result, error = task.run(), None
        except BaseException as exc:  # the future carries it, as ThreadPoolExecutor's would
            result, error = None, exc
        ready: list[_Task] = []
        with self._lock:
            for key in task.keys:
                line = self._lines[key]
                line.popleft()
                if not line:
                    del self._lines[key]
                elif self._is_first(line[0]) and line[0] not in ready:
                    ready.append(line[0])
            self._unfinished.discard(task.done)
        for successor in ready:
            self._pool.submit(self._run, successor)
        if error is not None:
            task.done.set_exception(error)
        else:
            task.done.set_result(result)

    def drain(self, timeout: float) -> bool:
        """Wait for every task submitted so far, those still waiting their turn included."""
        with self._lock:
            pending = set(self._unfinished)
        if not pending:
            return True
        _done, not_done = wait(pending, timeout=timeout)
        return not not_done
