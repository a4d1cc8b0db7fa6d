"""The top-up sweep: the leader's periodic shell around `scheduler.rules.top_up.step` (seed 001, "Its
sibling: the backlog top-up ceiling").

Each minute it counts the sessions running a turn, moves the sweep's state (when the fleet went
under its ceiling, when the event last fired) and, when the rule says so, fires the
`no_sessions_in_progress` event to the `ao_event` triggers subscribed to it, so the idle fleet is
handed more work. The state is written in its own transaction, locked, before anything fires:
a second sweep cannot fire the same cooldown again, and a crash between the two loses that one
firing rather than doubling it. The state is the sweep's, not the operator's, so it is outside the
policy audit. What fires the event is a plug-in (`ctx.plugins.fleet_events`, which
`scheduler.wiring` fills with the session events' `fleet_event`), as the ao_event triggers are
steering, above this layer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col

from scheduler.context import Context
from scheduler.engine.fleet import running_sessions
from scheduler.rules.top_up import EVENT, TopUpPolicy, TopUpState, is_under, next_firing, step
from scheduler.store.db import core, session_scope
from scheduler.store.models import TopUpRecord
from scheduler.store.policy import load_policy
from templates import render

log = logging.getLogger("pacer.top_up")


@dataclass(frozen=True)
class TopUpReading:
    """Where the fleet sits against its top-up ceiling, as the gate card shows it."""

    policy: TopUpPolicy
    running: int
    state: TopUpState

    @property
    def is_under(self) -> bool:
        return is_under(self.policy, self.running)

    @property
    def next_firing(self) -> datetime | None:
        return next_firing(self.policy, self.state) if self.is_under else None


@dataclass(frozen=True)
class TopUpReport:
    running: int
    state: TopUpState
    fired: bool
    sessions: tuple[int, ...]


_STATE = sa_select(col(TopUpRecord.under_since), col(TopUpRecord.fired_at)).where(
    col(TopUpRecord.id) == 1
)  # built once: read every minute


def load_state(db: DBSession) -> TopUpState:
    found = core(db, _STATE).first()
    return TopUpState(found[0], found[1]) if found is not None else TopUpState()


def read_top_up(db: DBSession, policy: TopUpPolicy) -> TopUpReading:
    return TopUpReading(policy, running_sessions(db), load_state(db))


def fleet_facts(reading: TopUpReading, now: datetime) -> dict[str, object]:
    """What a `no_sessions_in_progress` trigger's template may read."""
    p = reading.policy
    fleet = {
        "running": reading.running, "ceiling": p.ceiling, "stretch_minutes": p.stretch_minutes,
        "cooldown_minutes": p.cooldown_minutes,
        "under_since": reading.state.under_since.isoformat() if reading.state.under_since else None,
    }
    return {"event": EVENT, "fleet": fleet, "text": render("text/top_up_event.j2", top_up=reading, now=now).strip()}


def top_up_sweep(ctx: Context) -> TopUpReport:
    """Most minutes nothing moves: that is found in one read, and only a change takes the lock,
    reads again under it and writes."""
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        policy = load_policy(db).top_up
        running = running_sessions(db)
        before = load_state(db)
    after, fire = step(policy, before, running, now)
    if after != before:
        with session_scope(ctx.engine) as db:
            policy = load_policy(db).top_up
            running = running_sessions(db)
            row = db.get(TopUpRecord, 1, with_for_update=True)
            before = TopUpState(row.under_since, row.fired_at) if row is not None else TopUpState()
            after, fire = step(policy, before, running, now)
            if after != before:
                row = row or TopUpRecord(id=1)
                row.under_since, row.fired_at = after.under_since, after.fired_at
                db.add(row)
    sessions: tuple[int, ...] = ()
    if fire:
        reading = TopUpReading(policy, running, after)
        facts = fleet_facts(reading, now)
        fired = [f for fire_event in ctx.plugins.fleet_events for f in fire_event(ctx, EVENT, facts)]
        sessions = tuple(f.session_id for f in fired)
        log.info("top-up: %s of %s running; %s fired, sessions %s", running, policy.ceiling, EVENT, list(sessions))
    return TopUpReport(running, after, fire, sessions)
