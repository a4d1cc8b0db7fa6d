"""Reads of the turns table that every decision repeats: the running fleet's few columns and each
budgeted runtime's recorded spend, read once per transaction."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.store.caches import cached, invalidated_by
from scheduler.store.db import core
from scheduler.store.models import Policy, Session, Turn

_RUNNING_KEY = "running"
_SPEND_KEY = "spend"

RunningRow = tuple[int, str | None, str, str, float]

_RUNNING_COLUMNS: tuple[Any, ...] = (
    Session.id, Session.scheduling_class, Session.genesis, Session.runtime, Session.weight,
    col(Session.preempt_mark_at).is_not(None),
)
_RUNNING = (  # built once: every decision reads it
    sa_select(*_RUNNING_COLUMNS)
    .join(Turn, col(Turn.session_id) == col(Session.id))
    .where(col(Turn.status) == "running")
)

invalidated_by(_RUNNING_KEY, Turn, Session)  # a class or weight change counts too


def running_rows(db: DBSession) -> list[RunningRow]:
    """(session id, own class, genesis, runtime, weight) for every turn a worker is executing
    now: a few columns, not whole rows, read once per transaction until a turn is written —
    every decision and the capacity check ask it."""
    return _running(db)[0]


def running_marks(db: DBSession) -> frozenset[int]:
    """The sessions of `running_rows` that carry a preemption mark, from the same read."""
    return _running(db)[1]


def _running(db: DBSession) -> tuple[list[RunningRow], frozenset[int]]:
    def load() -> tuple[list[RunningRow], frozenset[int]]:
        rows, marks = [], set()
        for sid, own, genesis, runtime, weight, marked in core(db, _RUNNING):
            rows.append((int(sid or 0), own, str(genesis), str(runtime), float(weight)))
            if marked:
                marks.add(int(sid or 0))
        return rows, frozenset(marks)

    return cached(db, _RUNNING_KEY, load)


def spent_on(db: DBSession, runtime: str, since: datetime | None) -> float:
    """The recorded cost of `runtime`'s finished turns since `since` (None: all of them)."""
    stmt = select(func.coalesce(func.sum(Turn.cost_usd), 0.0)).where(
        Turn.runtime == runtime, col(Turn.finished_at).is_not(None)
    )
    if since is not None:
        stmt = stmt.where(col(Turn.finished_at) > since)  # a turn that finished as the spend was reset is before it
    return float(db.exec(stmt).one())


# A queue pass asks for every candidate of a budgeted runtime: one sum per runtime per
# transaction, again after it resets a spend. Starting a turn spends nothing yet, and a turn's
# cost is written (`completion.complete_turn`) before any admission in its transaction, so a
# turn write does not drop the sum: a pass that starts ten sessions reads it once, not ten times.
invalidated_by(_SPEND_KEY, Policy)


def runtime_spend(db: DBSession, runtime: str, since: datetime | None) -> float:
    """`spent_on` once per runtime per transaction, again after the transaction writes the policy."""
    sums: dict[str, float] = cached(db, _SPEND_KEY, dict)
    if runtime not in sums:
        sums[runtime] = spent_on(db, runtime, since)
    return sums[runtime]


def spent_by(db: DBSession, session_id: int) -> float:
    """The recorded cost of the session's turns (a running turn counts 0 until it reports)."""
    stmt = select(func.coalesce(func.sum(Turn.cost_usd), 0.0)).where(Turn.session_id == session_id)
    return float(db.exec(stmt).one())


def spends_by(db: DBSession, session_ids: Collection[int]) -> dict[int, float]:
    """`spent_by` for many sessions in one query (a queue listing); absent ids spent nothing."""
    if not session_ids:
        return {}
    stmt = (
        select(Turn.session_id, func.coalesce(func.sum(Turn.cost_usd), 0.0))
        .where(col(Turn.session_id).in_(list(session_ids)))
        .group_by(col(Turn.session_id))
    )
    found = {int(sid): float(total) for sid, total in db.exec(stmt).all()}
    return {sid: found.get(sid, 0.0) for sid in session_ids}


_PROGRESS_COLUMNS: tuple[Any, ...] = (Turn.session_id, Turn.id, Turn.started_at, Turn.progress, Turn.progress_at)


def running_progress(db: DBSession, session_ids: Collection[int], now: datetime) -> dict[int, dict[str, Any]]:
    """What the agents of these sessions' running turns are doing, by session id: the progress the
    runner last kept on the turn (`scheduler.engine.leases.record_progress`: tool, detail, todos,
    tools_used), with the turn's `turn_id`, `started_at`, `progress_at`, the seconds it has run
    (`elapsed_s`) and `cost_usd`, the session's cost so far: its recorded turns, and the running
    turn's own cost when its agent has stated one. A session with no running turn, or whose
    running turn has said nothing of its progress yet, is left out."""
    if not session_ids:
        return {}
    rows = core(db, sa_select(*_PROGRESS_COLUMNS).where(
        col(Turn.session_id).in_(list(session_ids)), col(Turn.status) == "running"
    )).all()
    told = [(sid, turn_id, started, progress, at) for sid, turn_id, started, progress, at in rows
            if isinstance(progress, dict)]
    spent = spends_by(db, [row[0] for row in told])
    out = {}
    for session_id, turn_id, started_at, progress, progress_at in told:
        own = progress.get("cost_usd")
        own = float(own) if isinstance(own, int | float) and not isinstance(own, bool) else 0.0
        elapsed = max(int((now - started_at).total_seconds()), 0) if started_at is not None else None
        out[session_id] = {
            "turn_id": turn_id, "tool": progress.get("tool"), "detail": progress.get("detail"),
            "todos": progress.get("todos"), "tools_used": progress.get("tools_used", 0),
            "started_at": started_at, "progress_at": progress_at, "elapsed_s": elapsed,
            "cost_usd": round(spent.get(session_id, 0.0) + own, 4),
        }
    return out


_LATEST_COLUMNS: tuple[Any, ...] = (
    Turn.id, Turn.status, Turn.progress, Turn.progress_message, Turn.started_at, Turn.finished_at
)


def latest_progress(db: DBSession, session_id: int) -> dict[str, Any] | None:
    """The session's latest turn that kept progress, running or ended: its `turn_id`, `status`,
    `progress` (as the runner kept it), `progress_message` (the Slack message showing it, or
    None), `started_at` and `finished_at`; None when no turn of it has any."""
    row = core(db, sa_select(*_LATEST_COLUMNS).where(
        col(Turn.session_id) == session_id, col(Turn.progress_at).is_not(None)
    ).order_by(col(Turn.id).desc()).limit(1)).first()
    if row is None or not isinstance(row[2], dict):
        return None
    turn_id, status, progress, message, started_at, finished_at = row
    return {"turn_id": turn_id, "status": status, "progress": progress, "progress_message": message,
            "started_at": started_at, "finished_at": finished_at}
