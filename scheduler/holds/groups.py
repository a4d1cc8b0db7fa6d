"""Concurrency groups (seed 002, "One run per project"): at most N sessions of a group run at
once. Sessions that share a GitHub working tree share a group (intake sets
`Session.concurrency_group`, e.g. `repo:owner/name`), because they share one checkout, one
index and one branch. N is 1 unless the session's trigger says otherwise
(`Trigger.config["group_limit"]`).

A session asleep on a declared wait (`wake_me_up_later`) after it has run keeps its group's
claim: the tree is in the state it is waiting on, and a run in between would disturb it.

The rule holds for every class and on every path, a manual start included: StartNow into a busy
group is refused politely, naming the running session, and the session stays queued. Its Block
is skip-only — a busy group never holds up work of other groups behind it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.context import Context
from scheduler.engine.attempt import Block
from scheduler.errors import InvalidInput
from scheduler.store.caches import kept
from scheduler.store.models import Session, Status, Trigger, Turn
from templates import error_text, render

log = logging.getLogger("pacer.groups")

DEFAULT_LIMIT = 1
MAX_LIMIT = 100
REASON = "concurrency_group"


def repository_group(repository: str) -> str:
    """The group of sessions working in one GitHub repository's tree."""
    return f"repo:{repository.lower()}"


def parse_group_limit(value: Any) -> int:
    """A trigger's `group_limit`, validated (trigger editors call this before saving)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidInput(error_text("groups/limit_range", value=value, max_limit=MAX_LIMIT), field="group_limit")
    return value


def group_limit(db: DBSession, session: Session) -> int:
    """The limit of the session's group, from its trigger."""
    if session.trigger_id is None:
        return DEFAULT_LIMIT
    return declared_limits(db).get(session.trigger_id, DEFAULT_LIMIT)


def _claims(now: datetime) -> Any:
    """A session holding its group's claim: running a turn, or asleep on a declared wait after
    having run."""
    running = select(Turn.session_id).where(Turn.status == "running")
    asleep_after_running = and_(
        col(Session.status) == Status.WAITING.value,
        col(Session.wake_at) > now,
        col(Session.started_at).is_not(None),
    )
    return or_(col(Session.id).in_(running), asleep_after_running)


def occupying(db: DBSession, group: str, now: datetime, *, exclude_id: int | None = None) -> list[Session]:
    """The sessions holding a group's claim, oldest start first."""
    stmt = select(Session).where(Session.concurrency_group == group, _claims(now))
    if exclude_id is not None:
        stmt = stmt.where(col(Session.id) != exclude_id)
    return list(db.exec(stmt.order_by(col(Session.started_at), col(Session.id))))


def occupancy(db: DBSession, now: datetime) -> dict[str, int]:
    """How many sessions hold each group's claim now, for the groups with any: one read, so a
    queue pass can pass over the waiters of a full group without asking for each of them."""
    stmt = (
        select(Session.concurrency_group, func.count())
        .where(col(Session.concurrency_group).is_not(None), _claims(now))
        .group_by(col(Session.concurrency_group))
    )
    return {str(group): int(count) for group, count in db.exec(stmt)}


def declared_limits(db: DBSession) -> dict[int, int]:
    """Trigger id -> its valid `group_limit`, for the triggers that declare one; every other
    session's limit is DEFAULT_LIMIT. Every decision asks and triggers change rarely: the map is
    kept across transactions until a trigger is written (`caches.kept` reads the triggers' write
    counter in this transaction, so an edit committed by any process is seen by the next
    decision). Read-only for callers: the same map serves every transaction."""
    limits: dict[int, int] = kept(db, "group_limits", (Trigger,), lambda: _read_limits(db))
    return limits


def _read_limits(db: DBSession) -> dict[int, int]:
    limits = {}
    for trigger_id, config in db.exec(select(Trigger.id, Trigger.config)):
        if trigger_id is None or "group_limit" not in (config or {}):
            continue
        try:
            limits[int(trigger_id)] = parse_group_limit(config["group_limit"])
        except InvalidInput as exc:
            log.warning("trigger #%s: %s; using %d", trigger_id, exc, DEFAULT_LIMIT)
    return limits


def admission_check(ctx: Context) -> Callable[[DBSession, Session, datetime], Block | None]:
    def group_check(db: DBSession, session: Session, now: datetime) -> Block | None:
        group = session.concurrency_group
        if not group:
            return None
        limit = group_limit(db, session)
        holders = occupying(db, group, now, exclude_id=session.id)
        if len(holders) < limit:
            return None
        sentence = render("text/group_busy.j2", holders=holders, group=group, limit=limit, now=now)
        return Block(REASON, sentence, skip_only=True)

    return group_check
