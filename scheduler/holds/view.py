"""Every hold in force, in one read model: what the `holds` command, the API and the App Home
show, so they cannot disagree about why the queue is not starting work.

    queue holds      label, sentence, since, "Resumes at", whether Resume can work, how many wait
    operator holds   armer, selector, reason, expiry, the sessions held now
    cycling          sessions preempted again and again, and pairs taking each other's slot
                     (`scheduler.rules.cycling`): not a hold, but why spot work keeps stopping
    sessions         each held, paused, parked or sleeping session with its records, the headline
                     first (`scheduler.rules.waiting`'s ranking) and each with its re-check time

The prerequisite hold is computed here as it stands now (every candidate waits on one), with the
recorded row's `since` when `prerequisites.reconcile` has recorded it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.errors import NotFound
from scheduler.holds import operator as operator_holds
from scheduler.holds import prerequisites
from scheduler.holds import queue as queue_holds
from scheduler.holds.queue import QueueHoldView
from scheduler.rules.cycling import Cycling
from scheduler.rules.waiting import Mechanism, waiting_reason
from scheduler.store.models import OperatorHold, QueueHold, Session, Status
from scheduler.store.policy import load_policy
from scheduler.store.preemption_ledger import cycling_now
from scheduler.store.sessions import is_spot
from templates import error_text, render_chat

SESSION_ROWS = 30
HELD_SCAN = 500  # held sessions an operator hold's detail lists


@dataclass(frozen=True)
class HeldSession:
    id: int
    title: str
    records: list[Mechanism]  # the headline first, then the others on the record


@dataclass(frozen=True)
class OperatorHoldView:
    id: int
    selector_kind: str
    selector_value: str
    armer: str
    reason: str
    created_at: datetime
    expires_at: datetime | None
    held: tuple[int, ...] = ()  # sessions waiting on it now


def list_holds(db: DBSession, now: datetime) -> list[OperatorHoldView]:
    return [_view(db, h, now) for h in operator_holds.live_holds(db, now)]


def show_hold(db: DBSession, hold_id: int, now: datetime) -> OperatorHoldView:
    """One hold's full detail, released or not; `held` lists the sessions it holds now."""
    hold = db.get(OperatorHold, hold_id)
    if hold is None:
        raise NotFound(error_text("operator_holds/not_found", hold_id=hold_id))
    return _view(db, hold, now)


def _view(db: DBSession, hold: OperatorHold, now: datetime | None = None) -> OperatorHoldView:
    held: tuple[int, ...] = ()
    if now is not None and operator_holds.is_live(hold, now):
        policy = load_policy(db)
        held_here = (Session.status == Status.WAITING.value, Session.hold_reason == operator_holds.REASON)
        waiting = db.exec(select(Session).where(*held_here).order_by(col(Session.id)).limit(HELD_SCAN))
        held = tuple(s.id or 0 for s in waiting if operator_holds.selects(hold, s, policy))
    return OperatorHoldView(
        id=hold.id or 0, selector_kind=hold.selector_kind, selector_value=hold.selector_value, armer=hold.armer,
        reason=hold.reason, created_at=hold.created_at, expires_at=hold.expires_at, held=held,
    )



@dataclass(frozen=True)
class HoldsView:
    now: datetime
    queue_holds: list[QueueHoldView] = field(default_factory=list)
    operator_holds: list[OperatorHoldView] = field(default_factory=list)
    sessions: list[HeldSession] = field(default_factory=list)
    sessions_not_shown: int = 0
    cycling: Cycling | None = None  # not a hold, but why spot work keeps stopping: shown beside them

    @property
    def empty(self) -> bool:
        return not (self.queue_holds or self.operator_holds or self.sessions)

    def values(self) -> dict[str, Any]:
        """The template context of `chat/holds.j2`."""
        return {
            "queue_holds": self.queue_holds,
            "operator_holds": self.operator_holds,
            "sessions": self.sessions,
            "sessions_not_shown": self.sessions_not_shown,
            "cycling": self.cycling,
            "now": self.now,
        }


def all_holds(db: DBSession, now: datetime, *, session_rows: int = SESSION_ROWS) -> HoldsView:
    return HoldsView(
        now=now,
        queue_holds=_queue_holds(db, now),
        operator_holds=list_holds(db, now),
        sessions=_sessions(db, now, session_rows),
        sessions_not_shown=max(_parked_count(db) - session_rows, 0),
        cycling=cycling_now(db, now),
    )


def render_holds(view: HoldsView, flavour: str = "text") -> str:
    return render_chat("holds", flavour, **view.values())


def _waiting(db: DBSession, group: str | None) -> int:
    stmt = (
        select(func.count())
        .select_from(Session)
        .where(Session.status == Status.WAITING.value, col(Session.hold_reason).is_not(None))
    )
    if group is not None:
        stmt = stmt.where(Session.concurrency_group == group)
    return int(db.exec(stmt).one())


def _queue_holds(db: DBSession, now: datetime) -> list[QueueHoldView]:
    rows = [h for h in queue_holds.in_force(db, now) if h.reason != queue_holds.PREREQUISITE]
    views = [queue_holds.view(h, waiting=_waiting(db, h.group)) for h in rows]
    if any(h.group is None for h in rows):
        return views  # a hold on the whole queue is the reason: the prerequisites are not
    waits = prerequisites.queue_waits_on(db, now)
    if waits:
        recorded = queue_holds.live_hold(db, None, now)
        since = recorded.since if recorded is not None and recorded.reason == queue_holds.PREREQUISITE else now
        synthetic = QueueHold(
            id=recorded.id if recorded is not None else None, group=None, reason=queue_holds.PREREQUISITE,
            sentence=prerequisites.hold_sentence(waits), since=since, detail={"targets": [p.target for p in waits]},
        )
        views.insert(0, queue_holds.view(synthetic, waiting=_waiting(db, None)))
    return views


_PARKED = (
    Session.status == Status.WAITING.value,
    or_(
        col(Session.hold_reason).is_not(None),
        col(Session.pause_reason).is_not(None),
        col(Session.park_reason).is_not(None),
        col(Session.wake_at).is_not(None),
    ),
)


def _parked_count(db: DBSession) -> int:
    return int(db.exec(select(func.count()).select_from(Session).where(*_PARKED)).one())


def _sessions(db: DBSession, now: datetime, limit: int) -> list[HeldSession]:
    rows = db.exec(select(Session).where(*_PARKED).order_by(col(Session.id)).limit(limit))
    policy = load_policy(db)
    held = []
    for session in rows:
        reason = waiting_reason(session, now, spot=is_spot(session, policy))
        records = ([reason.headline] if reason.headline else []) + [loser.mechanism for loser in reason.others]
        held.append(HeldSession(session.id or 0, session.title, records))
    return held
