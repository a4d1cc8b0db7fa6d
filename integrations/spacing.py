"""Spacing a repeated call: at most once every `gap` seconds per key, and at most `per_hour` an
hour over all keys, the last ask of a burst always answered.

    spacing = Spacing(10.0, refresh, name="github-progress", per_hour=150, burst=30)
    spacing.ask(session_id)     # refresh(session_id) now, or once, when it may go
    spacing.mark(session_id)    # refresh ran unasked (a state change): the gap counts from now
    spacing.drop(session_id)    # no more for this key; an armed call is disarmed
    spacing.close()             # no more at all (the surface is closing)

A call asked for too soon is deferred, on a timer, to the first instant both bounds allow, and
every ask made meanwhile is answered by that one call: so a key's calls are at least `gap` apart
and none is lost, and `action` reads the latest state when it runs. The hourly bound is a bucket
of `burst` calls refilled at `per_hour` an hour: in any hour at most `per_hour + burst` calls.
The bucket is this process's (`MemoryBucket`) or, passed as `bucket=`, one every process on the
database shares (`StoreBucket`), so N processes together keep one hourly bound.
`action` runs on the asker's thread when it may go at once, else on the timer's (always on a
timer's with `inline=False`, for an asker that must not wait: a pipe's reader); an action that
fails is logged.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from scheduler.store import buckets

log = logging.getLogger("pacer.spacing")

K = TypeVar("K", bound=Hashable)
RETRY_SECONDS = 30.0  # a shared bucket the database cannot answer for is asked again after this


class Bucket(Protocol):
    def take(self) -> float:
        """0.0 when a call was taken now; else the seconds until one may be (nothing taken)."""
        ...


class MemoryBucket:
    """`burst` calls refilled at `per_hour` an hour, in this process."""

    def __init__(self, per_hour: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = per_hour / 3600.0
        self.burst = float(max(burst, 1))
        self.clock = clock
        self._tokens = self.burst
        self._filled_at = clock()

    def take(self) -> float:
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._filled_at) * self.rate)
        self._filled_at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return 0.0
        return (1 - self._tokens) / self.rate


class StoreBucket:
    """The same bucket kept in the database (`scheduler.store.buckets`), shared by every process."""

    def __init__(self, engine: Engine, name: str, per_hour: float, burst: int,
                 clock: Callable[[], float] = time.time) -> None:
        self.engine, self.name, self.per_hour, self.burst, self.clock = engine, name, per_hour, burst, clock

    def take(self) -> float:
        try:
            return buckets.take(self.engine, self.name, per_hour=self.per_hour, burst=self.burst, now=self.clock())
        except SQLAlchemyError as exc:
            log.warning("%s: the shared hourly budget could not be read (%s); asking again in %.0f s",
                        self.name, type(exc).__name__, RETRY_SECONDS)
            return RETRY_SECONDS


class Spacing(Generic[K]):
    def __init__(
        self,
        gap: float,
        action: Callable[[K], object],
        *,
        name: str,
        per_hour: float | None = None,
        burst: int = 1,
        bucket: Bucket | None = None,
        clock: Callable[[], float] = time.monotonic,
        inline: bool = True,
    ) -> None:
        self.gap = gap
        self.inline = inline
        self.action = action
        self.name = name
        self.bucket = bucket if bucket is not None else MemoryBucket(per_hour, burst, clock) if per_hour else None
        self.clock = clock
        self._last: dict[K, float] = {}
        self._armed: dict[K, threading.Timer] = {}
        self._lock = threading.Lock()
        self._closed = False

    def ask(self, key: K) -> None:
        self._ask(key, inline=self.inline)

    def _ask(self, key: K, *, inline: bool) -> None:
        with self._lock:
            if self._closed or key in self._armed:
                return  # the armed call answers this ask too
            now = self.clock()
            wait = self._last.get(key, -math.inf) + self.gap - now
            if wait <= 0 and inline and self.bucket is not None:
                wait = self.bucket.take()  # a call is taken only when it goes now
            if wait > 0 or not inline:
                self._arm(key, max(wait, 0.0))
                return
            self._last[key] = now
        self._run(key)

    def _arm(self, key: K, seconds: float) -> None:
        """Under the lock: ask again for `key` in `seconds`."""
        timer = threading.Timer(seconds, self._fire, (key,))
        timer.daemon = True
        timer.name = f"pacer-{self.name}"
        self._armed[key] = timer
        timer.start()

    def mark(self, key: K) -> None:
        """The action for `key` ran outside the spacing: the next asked one waits a gap from now."""
        with self._lock:
            self._last[key] = self.clock()

    def drop(self, key: K) -> None:
        with self._lock:
            self._last.pop(key, None)
            timer = self._armed.pop(key, None)
        if timer is not None:
            timer.cancel()

    def close(self) -> None:
        """No call from now on: the armed ones are disarmed, and later asks do nothing."""
        with self._lock:
            self._closed = True
            armed, self._armed = list(self._armed.values()), {}
        for timer in armed:
            timer.cancel()

    def _fire(self, key: K) -> None:
        with self._lock:
            self._armed.pop(key, None)
        self._ask(key, inline=True)  # asks again: a mark or the bucket may have moved its time since it was armed

    def _run(self, key: K) -> None:
        try:
            self.action(key)
        except Exception:
            log.exception("%s: the spaced call for %s failed", self.name, key)


__all__ = ["Bucket", "MemoryBucket", "Spacing", "StoreBucket"]
