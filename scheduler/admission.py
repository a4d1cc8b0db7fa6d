"""What the admission checks beyond the gate share: the manual-start flag, fail-open reads and
a per-transaction cache.

The checks (operator holds, queue holds, prerequisites, concurrency groups, weighted capacity,
the deference window) are registered on `Context.admission_checks` by `scheduler.wiring`, in
that order: the first that says no names the reason a session waits.

A manual start is not the auto-queue. Seed 002: pressing Run "ignores position order,
prerequisites, the interference check, the cost budget and a rate limit wait. Only the
auto-queue honours those" — but never the one-run-per-group rule. StartNow marks its admission
with `manual_start()`, and the checks that a person's press overrides read `is_manual()`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session as DBSession

log = logging.getLogger("pacer.admission")

T = TypeVar("T")

_MANUAL: ContextVar[bool] = ContextVar("pacer_manual_start", default=False)


@contextmanager
def manual_start() -> Iterator[None]:
    """Mark the admissions inside as a person's direct start (StartNow)."""
    token = _MANUAL.set(True)
    try:
        yield
    finally:
        _MANUAL.reset(token)


def is_manual() -> bool:
    return _MANUAL.get()


def read_or_fail_open(db: DBSession, what: str, read: Callable[[], T], fallback: T) -> T:
    """Read a store inside a savepoint; if it cannot be read, log one line and return `fallback`.

    The savepoint matters on PostgreSQL: a failed statement aborts the whole transaction, and
    the queue pass that asked must still be able to start the sessions a hold store would not
    have held (seed 000: "holds fail open … rather than stranding waiters")."""
    try:
        with db.begin_nested():
            return read()
    except SQLAlchemyError as exc:
        log.warning("%s could not be read (%s); admission ignores it this time", what, type(exc).__name__)
        return fallback


def cached(db: DBSession, key: str, load: Callable[[], T]) -> T:
    """One read per transaction: a queue pass asks every candidate, the rows do not change."""
    store = db.info.setdefault("pacer.admission", {})
    if key not in store:
        store[key] = load()
    return store[key]  # type: ignore[no-any-return]


def forget(db: DBSession, key: str) -> None:
    """Drop a cached read after this transaction changed what it read."""
    db.info.get("pacer.admission", {}).pop(key, None)
