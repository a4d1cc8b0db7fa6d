"""Turn leases: which process runs a turn, and until when it vouches for it.

A turn starts with an owner (the process that dispatched it, `records.start`) and a lease
(`Context.turn_lease` from the start). While the owner's workers hold the turn, the owner's
heartbeat renews the lease (`renew`). A process that dies stops renewing; once its leases run
out, recovery on whichever process sweeps (`lost_turns`) takes those turns, and only those: a
turn whose owner is alive and beating is never taken, whoever sweeps. A turn started with no
lease (a context with no heartbeat: tests, the simulator) counts as lost whenever recovery asks.

Recovery ends the turn and holds its prompt again, so the next run is a new turn row: a late
report from an owner that lost its lease finds its turn ended and changes nothing, and the
owner's next heartbeat halts it (`renew` does not return it).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, or_, update
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.store.db import core
from scheduler.store.models import Session, Turn


def owner_id() -> str:
    """This process, as a turn's owner: host and pid for people, a nonce so a restarted
    process with the same pid is never mistaken for the one that died."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lost_turns(db: DBSession, now: datetime, *, alive_here: Collection[int] = ()) -> list[Turn]:
    """Running turns whose lease has run out (or that never had one), locked for the caller.
    Rows another process is recovering right now are skipped, not waited for. A turn whose job
    waits for a worker has no lease yet and is not lost: the queue holds it (`expire_stalled`
    covers the worker that took the job and died before it claimed the turn). `alive_here` are
    the turns the sweeping process runs itself: a lease tells other processes whether the owner
    lives, and the owner knows; a renewal late behind a busy database (SQLite's one writer) must
    not make a process give back, and so run twice, a turn its own agent is still running."""
    never_leased = and_(col(Turn.lease_expires_at).is_(None), col(Turn.job_id).is_(None))
    stmt = (
        select(Turn)
        .where(Turn.status == "running", or_(never_leased, col(Turn.lease_expires_at) <= now))
        .order_by(col(Turn.id))
        .with_for_update(skip_locked=True)
    )
    if alive_here:
        stmt = stmt.where(col(Turn.id).not_in(list(alive_here)))
    return list(db.exec(stmt).all())


def renew(engine: Engine, owner: str, turn_ids: Collection[int], until: datetime) -> set[int]:
    """Extend the lease of `owner`'s running turns among `turn_ids` to `until`; the ids renewed.
    A turn not returned has ended, or was recovered elsewhere after its lease ran out."""
    if not turn_ids:
        return set()
    stmt = (
        update(Turn)
        .where(col(Turn.id).in_(list(turn_ids)), col(Turn.owner) == owner, col(Turn.status) == "running")
        .values(lease_expires_at=until)
        .returning(col(Turn.id))
    )
    with engine.begin() as conn:
        return {turn_id for turn_id in conn.execute(stmt).scalars() if turn_id is not None}


def claim(engine: Engine, turn_id: int, owner: str, until: datetime) -> bool:
    """Take a turn a worker machine was handed: `owner` and a lease, only while the turn still
    runs and nobody owns it. False when no row changed (the job was delivered twice, or the turn
    ended before a worker took it): the caller then runs nothing."""
    stmt = (
        update(Turn)
        .where(col(Turn.id) == turn_id, col(Turn.status) == "running", col(Turn.owner).is_(None))
        .values(owner=owner, lease_expires_at=until)
    )
    with engine.begin() as conn:
        return bool(conn.execute(stmt).rowcount)


def record_agent_session(engine: Engine, turn_id: int, owner: str, agent_session_id: str) -> bool:
    """The agent's own session id, written on the session of `owner`'s running turn as soon as the
    agent states it, so a re-run of the turn resumes that conversation. False when the turn has
    ended or is no longer `owner`'s: a turn recovered elsewhere may already run again, and its id
    is the one that counts."""
    turn = select(Turn.session_id).where(
        col(Turn.id) == turn_id, col(Turn.owner) == owner, col(Turn.status) == "running"
    )
    stmt = update(Session).where(col(Session.id) == turn.scalar_subquery()).values(agent_session_id=agent_session_id)
    with engine.begin() as conn:
        return bool(conn.execute(stmt).rowcount)


def record_progress(
    engine: Engine, turn_id: int, owner: str | None, progress: dict[str, Any], at: datetime
) -> int | None:
    """What the agent of `owner`'s running turn is doing now (`progress`, read from its stream
    at `at`), kept on the turn's row for every process to read. Returns the turn's session id,
    or None when the turn has ended or is no longer `owner`'s (owner None: any running turn)."""
    where = [col(Turn.id) == turn_id, col(Turn.status) == "running"]
    if owner is not None:
        where.append(col(Turn.owner) == owner)
    stmt = update(Turn).where(*where).values(progress=progress, progress_at=at).returning(col(Turn.session_id))
    with engine.begin() as conn:
        found = conn.execute(stmt).first()
    return None if found is None else int(found[0])


def keep_progress_message(engine: Engine, turn_id: int, message: str) -> bool:
    """The Slack message that shows the turn's progress (its ts), kept once: False when the turn
    already has one, so a second poster edits that message rather than post another."""
    stmt = update(Turn).where(col(Turn.id) == turn_id, col(Turn.progress_message).is_(None)).values(
        progress_message=message
    )
    with engine.begin() as conn:
        return bool(conn.execute(stmt).rowcount)


def expire_stalled(db: DBSession, job_ids: Collection[int], now: datetime) -> None:
    """Turns whose job a dead worker took before it claimed them: their lease runs out now, so
    the recovery that follows in this transaction takes them."""
    if job_ids:
        stmt = (
            update(Turn)
            .where(col(Turn.job_id).in_(list(job_ids)), col(Turn.status) == "running", col(Turn.owner).is_(None))
            .values(lease_expires_at=now)
        )
        core(db, stmt)
