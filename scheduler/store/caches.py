"""The read store's caches, in one place: a per-transaction memo, presence (which hold stores
have rows at all) and reads kept across transactions while their tables are unchanged
(`scheduler.store.versions`).

Only the store uses them. The layers above ask named store functions (`hold_reads`,
`turn_reads`, `trigger_reads`, `session_rows`, `policy.load_policy`), which answer through
these; a flush drops what the transaction wrote, so no caller ever forgets a read itself.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import event, literal, union_all
from sqlalchemy import select as sa_select
from sqlalchemy.orm import Session as ORMSession
from sqlalchemy.sql import Select
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.store.db import core, read_or_fail_open
from scheduler.store.models import StoreVersion

T = TypeVar("T")


def cached(db: DBSession, key: str, load: Callable[[], T]) -> T:
    """One read per transaction: a queue pass asks every candidate, the rows do not change."""
    store = db.info.setdefault("pacer.memo", {})
    if key not in store:
        store[key] = load()
    return store[key]  # type: ignore[no-any-return]


def forget(db: DBSession, key: str) -> None:
    """Drop a cached read after this transaction changed what it read."""
    db.info.get("pacer.memo", {}).pop(key, None)


# --------------------------------------------------------------------------- presence
#
# Most queues carry no operator hold, no queue hold and no prerequisite most of the time, and a
# held session's alarm asks once for itself: reading three empty stores is three statements to
# learn nothing. Each store registers the rows whose existence makes its check worth running;
# one statement per transaction says which stores have any, and a check whose store is empty
# answers without reading it.

_PRESENCE: dict[str, Callable[[], Select[Any]]] = {}
_PRESENCE_MODELS: list[type] = []
_WRITTEN_BY: dict[type, set[str]] = {}


def invalidated_by(key: str, *models: type) -> None:
    """A cached read under `key` is read again after this transaction writes any `models` row."""
    for model in models:
        _WRITTEN_BY.setdefault(model, set()).add(key)


def register_presence(key: str, model: type, rows: Callable[[], Select[Any]]) -> None:
    """`rows()` selects what makes the check under `key` worth running, from `model`'s table
    alone: presence is kept across transactions until a `model` row is written (see `kept`)."""
    _PRESENCE[key] = rows
    if model not in _PRESENCE_MODELS:
        _PRESENCE_MODELS.append(model)
    invalidated_by(key, model)
    invalidated_by("presence", model)


def present(db: DBSession, key: str) -> bool:
    """Whether the store behind `key` has anything for its check to read (True when unknown)."""
    found: set[str] | None = cached(
        db,
        "presence",
        lambda: kept(
            db,
            "presence",
            tuple(_PRESENCE_MODELS),
            lambda: read_or_fail_open(db, "the hold stores", lambda: _presence(db), None),
        ),
    )
    return found is None or key not in _PRESENCE or key in found


_PRESENCE_STMT: dict[tuple[str, ...], Any] = {}  # built once per set of registered stores


def _presence(db: DBSession) -> set[str]:
    keys = tuple(_PRESENCE)
    if not keys:
        return set()
    stmt = _PRESENCE_STMT.get(keys)
    if stmt is None:
        parts = [select(literal(key)).where(_PRESENCE[key]().exists()) for key in keys]
        stmt = _PRESENCE_STMT[keys] = parts[0] if len(parts) == 1 else union_all(*parts)
    return {str(key) for key in core(db, stmt).scalars()}


@event.listens_for(ORMSession, "after_flush")
def _stores_written(db: ORMSession, _flush: Any) -> None:
    wrote(db, *{type(obj) for obj in (*db.new, *db.dirty, *db.deleted)})


def wrote(db: ORMSession, *models: type) -> None:
    """Record that this transaction wrote `models` rows: its cached reads of them are dropped
    now, and kept reads at commit. A flush records itself; a Core write says so here."""
    db.info.setdefault("pacer.written", set()).update(models)
    store = db.info.get("pacer.memo")
    if not store:
        return
    for model in models:
        for key in _WRITTEN_BY.get(model, ()):
            store.pop(key, None)


# --------------------------------------------------------------------------- kept reads
#
# A few small reads are asked by nearly every transaction (the policy row, which hold stores
# have rows, which states a session-event trigger watches, the triggers' group limits) and
# change rarely. `kept` holds such a read across transactions, per engine, while the tables it
# read are at the version it was read at (`scheduler.store.versions`: database triggers count every
# write, from any process). The versions are one small read per transaction; without them the
# reads they stand for are asked every time. Staleness is bounded by the transaction itself: a
# write that commits after this transaction read the versions is seen by the next one.

_KEPT: weakref.WeakKeyDictionary[Any, dict[str, tuple[tuple[Any, ...], Any]]] = weakref.WeakKeyDictionary()
_VERSIONS = sa_select(col(StoreVersion.name), col(StoreVersion.version))


def _versions(db: DBSession) -> dict[str, int] | None:
    """The store versions as this transaction read them (once); None when they cannot be read."""
    if "pacer.versions" not in db.info:
        read = lambda: {str(name): int(version) for name, version in core(db, _VERSIONS)}  # noqa: E731
        db.info["pacer.versions"] = read_or_fail_open(db, "the store versions", read, None)
    found: dict[str, int] | None = db.info["pacer.versions"]
    return found


def kept(db: DBSession, key: str, models: tuple[type, ...], load: Callable[[], T]) -> T:
    """`load()` once per version of the `models`' tables per engine, or whenever this transaction
    wrote (or is about to flush) one of them: it reads its own write. A None result (an
    unreadable store) is never kept."""
    pending = {type(obj) for obj in (*db.new, *db.dirty, *db.deleted)} if (db.new or db.dirty or db.deleted) else set()
    if pending.intersection(models) or db.info.get("pacer.written", set()).intersection(models):
        return load()
    versions = _versions(db)
    stamp = (
        tuple(versions.get(str(getattr(m, "__tablename__", "")), -1) for m in models) if versions is not None else None
    )
    if stamp is None or -1 in stamp:
        return load()  # no counter to trust: never kept
    store = _KEPT.setdefault(db.get_bind(), {})
    hit = store.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]  # type: ignore[no-any-return]
    value = load()
    if value is not None:
        store[key] = (stamp, value)  # the versions read before loading: a racing write reloads
    return value


def kept_for(db: DBSession, key: str, stamp: Any, load: Callable[[], T]) -> T:
    """`load()` once per `stamp` per engine: a read of what cannot change while the stamp holds
    (a history up to an hour's start, stamped with that hour). A None result is never kept."""
    store = _KEPT.setdefault(db.get_bind(), {})
    hit = store.get(key)
    if hit is not None and hit[0] == (stamp,):
        return hit[1]  # type: ignore[no-any-return]
    value = load()
    if value is not None:
        store[key] = ((stamp,), value)
    return value


def forget_kept(engine: Any) -> None:
    """Drop every kept read for `engine` (after a wipe that reset the counters, e.g. a TRUNCATE)."""
    _KEPT.pop(engine, None)


# A savepoint's release or rollback fires these events too: only the outer transaction's end
# counts. The versions and this transaction's own writes are the transaction's, never the next's.
@event.listens_for(ORMSession, "after_commit")
@event.listens_for(ORMSession, "after_rollback")
def _ended(db: ORMSession) -> None:
    if db.in_nested_transaction():
        return
    db.info.pop("pacer.written", None)
    db.info.pop("pacer.versions", None)
