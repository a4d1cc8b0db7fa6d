"""What nearly every transaction asks of the triggers: the group limits they declare and the
session states an ao_event trigger watches. Triggers change rarely, so each answer is kept across
transactions, per engine, until a trigger is written: `caches.kept` reads the triggers' write
counter in this transaction (`scheduler.store.versions`), so an edit committed by any process is
seen by the next transaction, and a transaction that writes a trigger reads its own write.

The layers above know how to turn trigger rows into each answer; they pass that as `read`.
Read-only for callers: the same value serves every transaction.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlmodel import Session as DBSession

from scheduler.store.caches import kept
from scheduler.store.models import Trigger


def trigger_group_limits(db: DBSession, read: Callable[[], dict[int, int]]) -> dict[int, int]:
    """Trigger id -> its declared `group_limit`, as `read()` builds it from the triggers."""
    return kept(db, "group_limits", (Trigger,), read)


def trigger_watched_states(db: DBSession, read: Callable[[], frozenset[str]]) -> frozenset[str]:
    """The session states some enabled ao_event trigger watches, as `read()` builds them."""
    return kept(db, "watched_states", (Trigger,), read)
