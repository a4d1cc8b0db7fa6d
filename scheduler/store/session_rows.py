"""Session rows written in one statement, and a read of the sessions table that a queue pass
repeats for every candidate, kept for the rest of the transaction until it writes a session (a
flush, or `update_session`, drops it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from sqlalchemy import bindparam, update
from sqlmodel import Session as DBSession

from scheduler.store.caches import cached, invalidated_by, wrote
from scheduler.store.db import core, read_or_fail_open
from scheduler.store.models import SESSIONS, Session

T = TypeVar("T")

_BLOCKED = "blocked_sessions"

# A session that was blocked may have started again: any session write reads them again.
invalidated_by(_BLOCKED, Session)


def blocked_sessions_of_group(db: DBSession, group: str, read: Callable[[], list[T]]) -> list[T]:
    """The blocked sessions of `group` as `read()` returns them: once per group per transaction,
    none (failing open) when they cannot be read."""
    by_group: dict[str, list[T]] = cached(db, _BLOCKED, dict)
    if group not in by_group:
        by_group[group] = read_or_fail_open(db, "the blocked sessions", read, list[T]())
    return by_group[group]


_UPDATES: dict[tuple[str, ...], Any] = {}


def _update(columns: tuple[str, ...]) -> Any:
    """UPDATE sessions SET <columns> for one row, built once per set of columns."""
    stmt = _UPDATES.get(columns)
    if stmt is None:
        stmt = _UPDATES[columns] = (
            update(SESSIONS)
            .where(SESSIONS.c.id == bindparam("row_id"))
            .values({c: bindparam(f"v_{c}") for c in columns})
        )
    return stmt


def update_session(db: DBSession, session_id: int | None, values: Mapping[str, Any]) -> None:
    """Write `values` to one session row as one UPDATE, past the ORM: this transaction's reads of
    the sessions table are dropped as a flush would drop them."""
    core(db, _update(tuple(values)), {"row_id": session_id, **{f"v_{k}": v for k, v in values.items()}})
    wrote(db, Session)
