"""The held sessions a queue pass reads, a page at a time and in queue order (priority above,
then precedence, then age): a few columns each, not the row, less what the pass has learned
cannot start (seed 000, "non-fitting waiters are skipped")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Protocol

from sqlalchemy import bindparam, literal, not_, union_all
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col

from scheduler.rules import failures
from scheduler.rules.genesis import DEFAULT_CLASS, Genesis, SchedulingClass
from scheduler.rules.snapshot import PolicyView
from scheduler.store.db import core
from scheduler.store.models import Session, Status
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
    """Built once per set of class defaults: every queue pass runs it.

    The queue's order puts priority above spot, and the class is resolved from two columns under
    the policy's defaults, so no index can hold that order. Sorting every waiting row for each
    page made a pass grow with the queue (130–153 ms at 100,000 waiting on SQLite). So the page
    is read as bands that an index does hold in order (`ix_sessions_class_rank`,
    `ix_sessions_rank`): each way a row resolves to priority (its own class, or no class of its
    own and a genesis whose default is priority) is one range of the class index, and the rest
    is one walk down the rank index. Each band reads at most a page; the page is the first
    `limit` of them all, in the queue's order (`ranking.queue_order`)."""
    resolved = class_expr_for(defaults)
    own = col(Session.scheduling_class)
    genesis = col(Session.genesis)
    priority = SchedulingClass.PRIORITY.value
    bands: list[Any] = [own == priority]
    bands += [own.is_(None) & (genesis == g.value) for g, cls in zip(DEFAULT_CLASS, defaults, strict=True)
              if cls is SchedulingClass.PRIORITY]
    if DEFAULT_CLASS[Genesis.UNKNOWN] is SchedulingClass.PRIORITY:  # a genesis the CASE does not name
        known = sorted(g.value for g in DEFAULT_CLASS)
        gaps = [genesis < known[0], genesis > known[-1]]
        gaps += [(genesis > low) & (genesis < high) for low, high in zip(known, known[1:], strict=False)]
        bands += [own.is_(None) & gap for gap in gaps]
    branches = [_band(0, band, limit, resolved, by_index=False) for band in bands]
    branches.append(_band(1, resolved != priority, limit, resolved, by_index=True))
    page_of = union_all(*(b.subquery().select() for b in branches)).subquery()
    return (
        sa_select(*(page_of.c[c.key] for c in _CANDIDATE_COLUMNS))
        .order_by(page_of.c.band, page_of.c.precedence.desc(), page_of.c.created_at.asc(), page_of.c.id.asc())
        .limit(limit)
    )


def _band(rank: int, where: Any, limit: int, resolved: Any, *, by_index: bool) -> Any:
    """One band of the page: the rows `where` selects, at most `limit`. The rest of the queue is
    read down the rank index in its order; a priority band is found by the class index and its
    few rows sorted. Its order is on `precedence + 0` so that no planner walks the rank index
    instead, reading every waiting row to find a band's few."""
    precedence: Any = col(Session.precedence) if by_index else col(Session.precedence) + 0
    group = col(Session.concurrency_group)
    trigger = col(Session.trigger_id)
    in_full_group = group.in_(bindparam("full", expanding=True)) & (
        trigger.is_(None) | trigger.not_in(bindparam("declared", expanding=True))
    )
    return (
        sa_select(*_CANDIDATE_COLUMNS, literal(rank).label("band"))
        .where(
            col(Session.status) == Status.WAITING.value,
            where,
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
        .order_by(precedence.desc(), col(Session.created_at).asc(), col(Session.id).asc())
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
