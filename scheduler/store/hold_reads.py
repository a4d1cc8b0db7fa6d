"""The hold stores as admission reads them: operator holds, queue holds and the sessions that
declare a prerequisite.

A queue pass asks every candidate whether a hold store holds it, and most of the time no store
has a row at all. So each store says first whether it has anything (`any_*`: one statement per
transaction for all three, kept across transactions until one of their tables is written, by any
process — `scheduler.store.versions`), and its rows are read once per transaction, again after the
transaction writes one (a flush drops the read). A store that cannot be read fails open: admission
sees no hold, with a log line (seed 000, "holds fail open … rather than stranding waiters").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import or_
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.store.caches import cached, present, register_presence
from scheduler.store.db import read_or_fail_open
from scheduler.store.models import OperatorHold, Prerequisite, QueueHold, Session, Status

OPERATOR_HOLDS = "operator_holds"
QUEUE_HOLDS = "queue_holds"
PREREQUISITES = "prerequisite_sessions"

ENDED = frozenset({Status.DONE.value, Status.FAILED.value, Status.ARCHIVED.value})
_SESSION_ARMER = re.compile(r"^session:([0-9]{1,12})$")

register_presence(
    OPERATOR_HOLDS, OperatorHold, lambda: select(OperatorHold.id).where(col(OperatorHold.released_at).is_(None))
)
register_presence(QUEUE_HOLDS, QueueHold, lambda: select(QueueHold.id).where(col(QueueHold.released_at).is_(None)))
# Any row at all: presence is kept until a prerequisite is written, and which declaring sessions
# are unfinished changes with every session's status.
register_presence(PREREQUISITES, Prerequisite, lambda: select(Prerequisite.id))


def any_operator_holds(db: DBSession) -> bool:
    """Whether any operator hold is unreleased (True when the stores cannot be read)."""
    return present(db, OPERATOR_HOLDS)


def any_queue_holds(db: DBSession) -> bool:
    """Whether any queue hold is unreleased (True when the stores cannot be read)."""
    return present(db, QUEUE_HOLDS)


def any_prerequisites(db: DBSession) -> bool:
    """Whether any session declares a prerequisite (True when the stores cannot be read)."""
    return present(db, PREREQUISITES)


def any_hold_store_in_use(db: DBSession) -> bool:
    """Whether any of the three hold stores has rows for admission to read."""
    return any(present(db, key) for key in (OPERATOR_HOLDS, QUEUE_HOLDS, PREREQUISITES))


# --------------------------------------------------------------------------- operator holds


def armer_session_id(armer: str) -> int | None:
    match = _SESSION_ARMER.match(armer)
    return int(match.group(1)) if match else None


def ended_armers(db: DBSession, holds: Sequence[OperatorHold]) -> set[str]:
    """The armers among `holds` that are sessions which have ended."""
    ids = {sid for h in holds if (sid := armer_session_id(h.armer)) is not None}
    if not ids:
        return set()
    alive = {
        f"session:{sid}"
        for sid, status in db.exec(select(Session.id, Session.status).where(col(Session.id).in_(ids))).all()
        if status not in ENDED
    }
    return {f"session:{sid}" for sid in ids} - alive


def operator_holds_in_force(db: DBSession, now: datetime) -> list[OperatorHold]:
    """The operator holds in force now, oldest first, read afresh: not released, their TTL not
    passed, their armer session not ended."""
    rows = list(
        db.exec(
            select(OperatorHold)
            .where(
                col(OperatorHold.released_at).is_(None),
                or_(col(OperatorHold.expires_at).is_(None), col(OperatorHold.expires_at) > now),
            )
            .order_by(col(OperatorHold.created_at), col(OperatorHold.id))
        )
    )
    ended = ended_armers(db, rows)
    return [h for h in rows if h.armer not in ended]


def live_operator_holds(db: DBSession, now: datetime) -> list[OperatorHold]:
    """`operator_holds_in_force` as admission reads it: once per transaction, none without a
    read when no hold is unreleased, none (failing open) when the store cannot be read."""
    if not any_operator_holds(db):
        return []
    read = lambda: read_or_fail_open(  # noqa: E731
        db, "the operator hold store", lambda: operator_holds_in_force(db, now), list[OperatorHold]()
    )
    holds: list[OperatorHold] = cached(db, OPERATOR_HOLDS, read)
    return holds


# --------------------------------------------------------------------------- queue holds


def queue_holds_in_force(db: DBSession, now: datetime) -> list[QueueHold]:
    """Queue holds gating admission now, read afresh: not released, and not past their own
    "Resumes at"; the whole queue's first."""
    stmt = (
        select(QueueHold)
        .where(
            col(QueueHold.released_at).is_(None),
            or_(col(QueueHold.resumes_at).is_(None), col(QueueHold.resumes_at) > now),
        )
        .order_by(col(QueueHold.group).is_not(None), col(QueueHold.since), col(QueueHold.id))
    )
    return list(db.exec(stmt))


def live_queue_holds(db: DBSession, now: datetime) -> list[QueueHold]:
    """`queue_holds_in_force` as admission reads it: once per transaction, none without a read
    when no hold is unreleased, none (failing open) when the store cannot be read."""
    if not any_queue_holds(db):
        return []
    read = lambda: read_or_fail_open(  # noqa: E731
        db, "the queue hold store", lambda: queue_holds_in_force(db, now), list[QueueHold]()
    )
    holds: list[QueueHold] = cached(db, QUEUE_HOLDS, read)
    return holds


# --------------------------------------------------------------------------- prerequisites


_UNFINISHED = (Status.WAITING.value, Status.RUNNING.value, Status.NEEDS_INPUT.value)


def _declaring(db: DBSession) -> set[int]:
    stmt = (
        select(Prerequisite.session_id)
        .join(Session, col(Session.id) == col(Prerequisite.session_id))
        .where(col(Session.status).in_(_UNFINISHED))
    )
    return set(db.exec(stmt).all())


def sessions_declaring_prerequisites(db: DBSession) -> set[int]:
    """Unfinished sessions that declare a prerequisite: one read per transaction (a queue pass),
    none when no prerequisite is recorded, none (failing open) when the store cannot be read."""
    if not any_prerequisites(db):
        return set()
    read = lambda: read_or_fail_open(db, "the prerequisite store", lambda: _declaring(db), set[int]())  # noqa: E731
    declaring: set[int] = cached(db, PREREQUISITES, read)
    return declaring
