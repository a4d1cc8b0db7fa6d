"""The held sessions a queue pass reads, a page at a time and in queue order (priority above,
then precedence, then age): a few columns each, not the row, less what the pass has learned
cannot start (seed 000, "non-fitting waiters are skipped")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Protocol

from sqlalchemy import bindparam, not_
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col

from scheduler.rules import failures
from scheduler.rules.genesis import SchedulingClass
from scheduler.rules.snapshot import PolicyView
from scheduler.store.db import core
from scheduler.store.models import Session, Status
from scheduler.store.ranking import queue_order
from scheduler.store.sessions import class_defaults, class_expr_for, class_from

PAGE = 25  # candidates read per page of the queue


@dataclass(frozen=True)
class Candidate:
    """What a queue pass needs to ask the gate about a held session: a few columns, not the row.
    The whole row is read only for a candidate the gate would admit."""

    id: int
    scheduling_class: str | None
    genesis: str
    runtime: str
    precedence: int
    created_at: datetime
    concurrency_group: str | None = None
    trigger_id: int | None = None
    weight: float = 1.0
    capacity: int | None = None
    capacity_multiplier: float | None = None

    def is_spot(self, policy: PolicyView) -> bool:
        return class_from(self.scheduling_class, self.genesis, policy) is SchedulingClass.SPOT


@dataclass(frozen=True)
class Passed:
    """What a pass has learned cannot start, so the next page of the queue leaves it out: the
    candidates already read, the groups full for a session of the default group limit, the
    triggers that declare a limit of their own (their sessions are asked in memory instead), and
    the runtimes whose spot sessions the gate refused for their burn (every spot session of that
    runtime asks the same question, and gets the same answer, until the pass ends)."""

    seen: tuple[int, ...] = ()
    full_groups: tuple[str, ...] = ()
    declared: tuple[int, ...] = ()
    paced: tuple[str, ...] = ()

    def params(self, now: datetime) -> dict[str, Any]:
        return {
            "now": now, "seen": list(self.seen), "full": list(self.full_groups), "declared": list(self.declared),
            "paced": list(self.paced),
        }


_CANDIDATE_COLUMNS: tuple[Any, ...] = (
    Session.id, Session.scheduling_class, Session.genesis, Session.runtime, Session.precedence, Session.created_at,
    Session.wake_at, Session.concurrency_group, Session.trigger_id, Session.weight, Session.capacity,
    Session.capacity_multiplier,
)


def candidates(
    db: DBSession, policy: PolicyView, now: datetime, limit: int = PAGE, passed: Passed = Passed()
) -> list[Candidate]:
    """Dormant held sessions, in queue order: priority above, then precedence, then age — less
    what `passed` says cannot start. A failed turn waiting out its retry backoff is not one until
    its retry time: that time is a floor (seed 002's six attempts are attempts over time), lifted
    only by its own alarm."""
    return page(db, policy, now, limit, passed)[0]


def page(
    db: DBSession, policy: PolicyView, now: datetime, limit: int, passed: Passed
) -> tuple[list[Candidate], list[int]]:
    """(the candidates not asleep, the ids of every row read)."""
    rows = list(core(db, _candidates_stmt(class_defaults(policy), limit), passed.params(now)))
    awake = [
        Candidate(
            int(sid or 0),
            own,
            str(genesis),
            str(runtime),
            int(precedence),
            created_at,
            group,
            trigger_id,
            float(weight),
            capacity,
            multiplier,
        )
        for sid, own, genesis, runtime, precedence, created_at, wake_at, group, trigger_id, weight, capacity,
        multiplier in rows
        if wake_at is None or wake_at <= now  # asleep: every automatic path declines it
    ]
    return awake, [int(r[0] or 0) for r in rows]


@lru_cache(maxsize=16)
def _candidates_stmt(defaults: tuple[SchedulingClass, ...], limit: int) -> Any:
    """Built once per set of class defaults: every queue pass runs it."""
    resolved = class_expr_for(defaults)
    group = col(Session.concurrency_group)
    trigger = col(Session.trigger_id)
    in_full_group = group.in_(bindparam("full", expanding=True)) & (
        trigger.is_(None) | trigger.not_in(bindparam("declared", expanding=True))
    )
    return (
        sa_select(*_CANDIDATE_COLUMNS)
        .where(
            col(Session.status) == Status.WAITING.value,
            col(Session.hold_reason).is_not(None),
            col(Session.pause_reason).is_(None),
            col(Session.park_reason).is_(None),
            col(Session.hold_reason).not_in(sorted(failures.RETRY_HOLD_REASONS))
            | (col(Session.hold_retry_at) <= bindparam("now")),
            col(Session.id).not_in(bindparam("seen", expanding=True)),
            group.is_(None) | not_(in_full_group),
            not_(
                (resolved == SchedulingClass.SPOT.value) & col(Session.runtime).in_(bindparam("paced", expanding=True))
            ),
        )
        .order_by(*queue_order(resolved))
        .limit(limit)
    )


class _Ranked(Protocol):
    @property
    def id(self) -> int | None: ...
    @property
    def precedence(self) -> int: ...
    @property
    def created_at(self) -> datetime: ...


def outranks(a: _Ranked, b: _Ranked) -> bool:
    """The queue's order between two spot sessions (`ranking.queue_order`): higher precedence
    first, then the older, then the lower id."""
    return (-a.precedence, a.created_at, a.id or 0) < (-b.precedence, b.created_at, b.id or 0)
