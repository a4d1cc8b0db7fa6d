"""Prerequisites (seed 002, "Declared prerequisites are honoured"): a session whose source text
says `depends on #12` or `@#12` waits until that issue or session is done, canceled or closed.

Blocked does not satisfy a prerequisite, and neither does failed: both are work left
half-done. A mention of something that does not exist counts for nothing rather than blocking
for ever. Only the text that starts the work is read — an issue's title and body, a Slack
message, a `/pacer new` or API prompt (`NewSession.declares`): comments are not prerequisites.

What a reference means, and how a session's declared prerequisites are recorded, is in
`scheduler/store/prerequisite_rows.py`. An issue target is the newest session whose `source`
names that repository and issue number (`source["repository"]` = "owner/name", `source["issue"]`
or `source["number"]` = 12). It is closed when any such session carries
`source["issue_state"] == "closed"` (`set_issue_state` records it); it is done when that newest
session is done, or canceled (archived).

When every candidate in the queue waits on a prerequisite, the queue holds with the prerequisite
reason, naming what it waits for (`reconcile`, run after every requested queue pass). Finishing a
prerequisite moves the queue by itself: a turn ending and an archive both ask for a queue pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import String, cast, func, or_
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.context import Context, request_queue_pass
from scheduler.engine.attempt import Block, is_manual
from scheduler.engine.effects import Effects
from scheduler.errors import InvalidInput
from scheduler.holds import queue as queue_holds
from scheduler.store.db import read_or_fail_open, session_scope
from scheduler.store.hold_reads import any_prerequisites, any_queue_holds, sessions_declaring_prerequisites
from scheduler.store.models import Prerequisite, Session, Status
from scheduler.store.prerequisite_rows import recorded_prerequisites
from templates import error_text, render

log = logging.getLogger("pacer.prerequisites")

SATISFYING = frozenset({Status.DONE.value, Status.ARCHIVED.value})
NAMED_IN_HOLD = 5  # targets a queue-level prerequisite hold names before "and N more"
REASON = "prerequisite"


@dataclass(frozen=True)
class Pending:
    """A prerequisite not yet satisfied, as a person reads it."""

    target: str  # "acme/api#12" or "#7"
    session_id: int | None  # the session behind it
    status: str  # that session's status


def issue_sessions(db: DBSession, repository: str, number: int) -> list[Session]:
    """Sessions whose source names this issue, oldest first."""
    repo_expr = func.lower(Session.source["repository"].as_string())
    # CAST to text: SQLite's JSON_EXTRACT gives 12 for a number, PostgreSQL's ->> gives '12'.
    issue_expr = cast(Session.source["issue"].as_string(), String)
    number_expr = cast(Session.source["number"].as_string(), String)
    stmt = (
        select(Session)
        .where(repo_expr == repository.lower(), or_(issue_expr == str(number), number_expr == str(number)))
        .order_by(col(Session.id))
    )
    return list(db.exec(stmt))


def target_sessions(db: DBSession, kind: str, ref: str) -> list[Session]:
    if kind == "session":
        found = db.get(Session, int(ref)) if ref.isdigit() else None
        return [found] if found is not None else []
    repo, _, number = ref.rpartition("#")
    return issue_sessions(db, repo, int(number)) if number.isdigit() else []


def pending_of(db: DBSession, prereq: Prerequisite) -> Pending | None:
    """None when satisfied: done, canceled, closed — or missing, which counts for nothing."""
    sessions = target_sessions(db, prereq.target_kind, prereq.target_ref)
    if not sessions:
        return None
    if prereq.target_kind == "issue" and any((s.source or {}).get("issue_state") == "closed" for s in sessions):
        return None
    newest = sessions[-1]
    if newest.status in SATISFYING:
        return None
    label = prereq.target_ref if prereq.target_kind == "issue" else f"#{prereq.target_ref}"
    return Pending(label, newest.id, newest.status)


def unsatisfied(db: DBSession, session_id: int) -> list[Pending]:
    return [p for prereq in recorded_prerequisites(db, session_id) if (p := pending_of(db, prereq)) is not None]


def waits_on(db: DBSession, waiter_id: int, target: Session) -> bool:
    """Whether `waiter_id` has an unsatisfied prerequisite naming `target` (hold deadlocks)."""
    for prereq in recorded_prerequisites(db, waiter_id):
        if any(s.id == target.id for s in target_sessions(db, prereq.target_kind, prereq.target_ref)):
            return pending_of(db, prereq) is not None
    return False


# --------------------------------------------------------------------------- admission


def admission_check(ctx: Context) -> Callable[[DBSession, Session, datetime], Block | None]:
    def prerequisite_check(db: DBSession, session: Session, now: datetime) -> Block | None:
        if is_manual():  # a person's press overrides declared order (seed 002)
            return None
        if session.id not in sessions_declaring_prerequisites(db):
            return None
        pending = read_or_fail_open(
            db, "the prerequisite store", lambda: unsatisfied(db, session.id or 0), list[Pending]()
        )
        if not pending:
            return None
        return Block(REASON, render("text/prerequisite_block.j2", pending=pending))

    return prerequisite_check


# --------------------------------------------------------------------------- the queue-level hold


def queue_waits_on(db: DBSession, now: datetime) -> list[Pending] | None:
    """When every candidate in the queue waits on a prerequisite, what they wait for; else None.

    The candidates are the sessions the queue pass examines: waiting, with a held turn, not
    paused, parked or asleep. Their recorded hold reason is the last admission's verdict."""
    base = (
        Session.status == Status.WAITING.value,
        col(Session.hold_reason).is_not(None),
        col(Session.pause_reason).is_(None),
        col(Session.park_reason).is_(None),
        or_(col(Session.wake_at).is_(None), col(Session.wake_at) <= now),
    )
    other = db.exec(select(Session.id).where(*base, Session.hold_reason != REASON).limit(1)).first()
    if other is not None:
        return None
    held = list(
        db.exec(select(Session).where(*base, Session.hold_reason == REASON).order_by(col(Session.id)).limit(50))
    )
    targets: dict[str, Pending] = {}
    for session in held:
        for pending in unsatisfied(db, session.id or 0):
            targets.setdefault(pending.target, pending)
    return list(targets.values()) or None


def hold_sentence(waits: Sequence[Pending]) -> str:
    return render(
        "text/queue_hold_prerequisite.j2", pending=waits[:NAMED_IN_HOLD], more=max(len(waits) - NAMED_IN_HOLD, 0)
    )


def reconcile(ctx: Context) -> None:
    """Record, update or lift the queue-level prerequisite hold (announced once when new)."""
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        reconcile_in(db, now, effects)
    effects.apply(ctx)


def reconcile_in(db: DBSession, now: datetime, effects: Effects) -> None:
    """`reconcile` inside the caller's transaction (`holds.sweep.report_derived`)."""
    if not (any_queue_holds(db) or any_prerequisites(db)):
        return  # no queue hold to lift, no prerequisite anyone could wait on
    live = queue_holds.live_hold(db, None, now)
    if live is not None and live.reason != REASON:
        return  # a real hold on the whole queue is the reason; sessions carry it, not this
    waits = queue_waits_on(db, now)
    if waits is None:
        if live is not None:
            queue_holds.release(db, live, now, by="prerequisites satisfied", effects=effects)
    else:
        spec = queue_holds.NewHold(None, REASON, hold_sentence(waits), detail={"targets": [p.target for p in waits]})
        queue_holds.record(db, effects, spec, now)


def set_issue_state(ctx: Context, repository: str, number: int, state: str) -> int:
    """An issue opened or closed (intake calls this from the webhook): record it on every session
    that names the issue, and ask for a queue pass when it closed. Returns the sessions updated."""
    if state not in ("open", "closed"):
        raise InvalidInput(error_text("prerequisites/state_unknown", state=state), field="state")
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        sessions = issue_sessions(db, repository, number)
        for session in sessions:
            source: dict[str, Any] = dict(session.source or {})
            source["issue_state"] = state
            session.source = source  # reassigned: an in-place change to a JSON column is not tracked
            session.updated_at = now
            db.add(session)
    if state == "closed" and sessions:
        request_queue_pass(ctx)
    return len(sessions)

