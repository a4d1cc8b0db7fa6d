"""What the running fleet claims, as the queue pass and the admission checks both read it: a
concurrency group's claim (seed 002, "One run per project": who holds a group's runs, and each
trigger's declared limit) and the weighted slot budget (seed 000, "Agent queued for a runner
slot": a session's claim, and the load of the turns running now). The checks that refuse on
them are `scheduler/holds/groups.py` and `scheduler/holds/capacity.py`; a queue pass reads them
to pass over waiters that cannot start without asking.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.context import Context
from scheduler.errors import InvalidInput
from scheduler.rules.slots import budget_for, fits
from scheduler.store.models import Session, Status, Trigger, Turn
from scheduler.store.trigger_reads import trigger_group_limits
from scheduler.store.turn_reads import running_rows
from templates import error_text

log = logging.getLogger("pacer.groups")  # a trigger's bad group limit is the groups' warning

DEFAULT_LIMIT = 1
MAX_LIMIT = 100


def parse_group_limit(value: Any) -> int:
    """A trigger's `group_limit`, validated (trigger editors call this before saving)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidInput(error_text("groups/limit_range", value=value, max_limit=MAX_LIMIT), field="group_limit")
    return value


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
    kept across transactions until a trigger is written (`store.trigger_reads`), so an edit
    committed by any process is seen by the next decision. Read-only for callers: the same map
    serves every transaction."""
    return trigger_group_limits(db, lambda: _read_limits(db))


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


@dataclass(frozen=True)
class Claim:
    """What a session asks of the slot budget: its weight, its own authored capacity, and whether
    the gate counts it (a spot session spending quota, gating on)."""

    weight: float
    capacity: int | None
    gated: bool
    multiplier: float | None = None

    @property
    def explicit(self) -> bool:
        """The session authored its own budget (a whole number or a multiplier)."""
        return self.capacity is not None or self.multiplier is not None

    def budget(self, slots: int) -> float:
        return budget_for(slots, self.capacity, self.multiplier)

    def refused(self, load: float, slots: int) -> bool:
        """Seed 000's admission rule beside `load` already running, for a session the gate does
        not count (priority, a runtime that spends no quota, gating off) that authored its own
        budget. A gated session's claim is the gate's own slot check (`rules/gate.py`): one
        reason, fleet_at_cap."""
        if self.gated or not self.explicit:
            return False
        return not fits(load, self.weight, self.budget(slots))


def occupied(db: DBSession, ctx: Context, *, exclude_id: int | None = None) -> tuple[float, int]:
    """(weighted load, sessions) of the running turns that spend quota — the gate's population."""
    load, count = 0.0, 0
    for session_id, _own, _genesis, runtime, weight in running_rows(db):
        if session_id == exclude_id or not ctx.runtime(runtime).spends_quota:
            continue
        load += max(float(weight), 0.0)
        count += 1
    return load, count
