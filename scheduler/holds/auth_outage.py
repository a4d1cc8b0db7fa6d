"""The auth-outage park (seed 001, "Three parks, one headline", "Precedence decides who gets the
headroom back"): when every account in the login pool needs to sign in again, no turn can start
anywhere, of either class — a turn would only fail on the first request. Its session is parked
instead: the turn waits on the row as a held one does (its prompt and attachments kept), and the
park record (`park_reason = "auth_outage"`, `park_at`) names the owner of its resume.

The owner is the un-park sweep, every 15 minutes, not a per-session re-check: nothing a single
session does brings a login back, and a ladder of re-checks against a pool that cannot serve
would only spin. Once an account can serve again the sweep wakes the parked population in queue
order — priority first, then spot by precedence, oldest first within a tie — through admission
(a session asleep on a wake still ahead stays asleep, its slot left to the next: a pause outranks
precedence),
so the spot gate and the slots decide how many of the spot sessions start now (the ranked fleet
wake); one the gate still refuses becomes an ordinary spot hold with its own re-check. The park
never touches a ceiling pause (`paused_by`), which has its own sweep: neither population starts
the other's sessions.

Which accounts count: a pool with no account readings is not an outage (a single-key source has
none; the gate's fail-open rules apply). A pool is out of logins when it has readings and every
one of them is `needs_reauth`: an account over its quota is spent, not signed out, and comes
back with its window.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.context import Context
from scheduler.engine.admit import admit
from scheduler.engine.attempt import Block, Work
from scheduler.engine.fleet import read_quota
from scheduler.engine.records import lock, replay
from scheduler.ports import QuotaReading
from scheduler.store.db import deciding_scope, session_scope
from scheduler.store.models import Session, Status
from scheduler.store.policy import load_policy
from scheduler.store.ranking import queue_order
from scheduler.store.sessions import class_expr
from templates import render

log = logging.getLogger("pacer.auth_outage")

REASON = "auth_outage"
SWEEP_EVERY = timedelta(minutes=15)


def out_of_logins(reading: QuotaReading | None) -> bool:
    """Every account the pool read needs to sign in again (and it read at least one)."""
    accounts = reading.accounts if reading is not None else ()
    return bool(accounts) and all(a.status == "needs_reauth" for a in accounts)


def admission_check(ctx: Context) -> Callable[[DBSession, Session, datetime], Block | None]:
    def auth_outage(db: DBSession, session: Session, now: datetime) -> Block | None:
        reading = read_quota(ctx, now)
        if not out_of_logins(reading):
            return None
        assert reading is not None
        sentence = render("text/auth_outage_park.j2", accounts=len(reading.accounts), every=SWEEP_EVERY)
        return Block(REASON, sentence, park=True)

    return auth_outage


def parked_ids(db: DBSession, ctx: Context) -> list[int]:
    """The parked sessions in queue order: priority first, then precedence, then age."""
    policy = load_policy(db)
    stmt = (
        select(col(Session.id))
        .where(Session.park_reason == REASON, Session.status == Status.WAITING.value)
        .order_by(*queue_order(class_expr(policy)))
    )
    return [int(i or 0) for i in db.exec(stmt)]


def unpark_sweep(ctx: Context) -> dict[str, int]:
    """Every 15 minutes: while the pool is still out of logins, nothing; once an account can
    serve, each parked session is asked again in queue order. Returns what happened."""
    now = ctx.clock.now()
    reading = read_quota(ctx, now)
    if out_of_logins(reading):
        return {"parked": -1}
    with session_scope(ctx.engine) as db:
        ids = parked_ids(db, ctx)
    outcomes: dict[str, int] = {}
    for session_id in ids:
        with deciding_scope(ctx.engine) as db:
            work = Work(db, ctx, now, reading=reading)
            session = lock(db, session_id)
            if session.park_reason != REASON:
                continue  # started or archived since the list was read
            session.park_reason = None
            session.park_at = None
            db.add(session)
            # One asleep on a wake still ahead stays asleep: the wake is its next event.
            outcome = admit(work, session, replay(db, session), wake=True).outcome
        work.effects.apply(ctx)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    if ids:
        log.info("auth-outage park: the pool can serve again; woke %d parked sessions: %s", len(ids), outcomes)
    return outcomes
