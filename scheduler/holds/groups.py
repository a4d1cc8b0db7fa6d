"""Concurrency groups (seed 002, "One run per project"): at most N sessions of a group run at
once. Sessions that share a GitHub working tree share a group (intake sets
`Session.concurrency_group`, e.g. `repo:owner/name`), because they share one checkout, one
index and one branch. N is 1 unless the session's trigger says otherwise
(`Trigger.config["group_limit"]`).

A session asleep on a declared wait (`wake_me_up_later`) after it has run keeps its group's
claim: the tree is in the state it is waiting on, and a run in between would disturb it.

The rule holds for every class and on every path, a manual start included: StartNow into a busy
group is refused politely, naming the running session, and the session stays queued. Its Block
is skip-only — a busy group never holds up work of other groups behind it. Who holds a group's
claim, and each trigger's limit, are read in `scheduler/engine/claims.py`, which the queue pass
reads too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlmodel import Session as DBSession

from scheduler.context import Context
from scheduler.engine.attempt import Block
from scheduler.engine.claims import DEFAULT_LIMIT, declared_limits, occupying
from scheduler.store.models import Session
from templates import render

REASON = "concurrency_group"


def repository_group(repository: str) -> str:
    """The group of sessions working in one GitHub repository's tree."""
    return f"repo:{repository.lower()}"


def group_limit(db: DBSession, session: Session) -> int:
    """The limit of the session's group, from its trigger."""
    if session.trigger_id is None:
        return DEFAULT_LIMIT
    return declared_limits(db).get(session.trigger_id, DEFAULT_LIMIT)


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
