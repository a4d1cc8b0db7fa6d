"""The start-time forecast from the store (issue 32, P20 item 2): the present state read as plain
values (`rules.forecast.Outlook`) and run forward (`rules.forecast.forecast`).

What is read: the quota windows (read BEFORE the transaction, as every gate decision does), the
turns running now, the waiting sessions only the gate and the queue hold, and what the history
says — each runtime's recent turn lengths, the share of its turns a follow-up came after, and how
many priority sessions were created in each hour of the week (the history read once an hour per
engine, as the demand-aware pace reads its own). A waiter a person or another session must
release first (an operator hold, a prerequisite, a cost cap) gets no forecast: nothing in the
store says when that happens. One asleep or on a retry backoff is forecast from when it wakes.

    found = forecast_now(ctx)            # {session id: Forecast}
    refresh(ctx)                         # the leader's job: recompute on a change, keep the rows

Where it runs: `refresh`, every 30 seconds on the leader (`bot/runtime/process.py`), recomputes
when the queue or the fleet changed since the last forecast (or STALE_AFTER has passed: the
windows move with time) and replaces the kept rows (`scheduler.store.forecast_rows`). Never on the
path of a Slack ack or a webhook answer: the surfaces only read the rows.
"""

from __future__ import annotations

import weakref
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col

from scheduler.context import Context
from scheduler.engine.fleet import burn_rate, read_quota, windows_from
from scheduler.ports import QuotaReading
from scheduler.rules import failures, queue_ladder
from scheduler.rules.demand import ArrivalHistory, arrival_profile
from scheduler.rules.forecast import Arrivals, Forecast, Outlook, Work, forecast, kind_of
from scheduler.rules.genesis import SchedulingClass
from scheduler.rules.snapshot import PolicyView
from scheduler.store.db import core, session_scope
from scheduler.store.demand_reads import learned
from scheduler.store.forecast_rows import history, replace_all
from scheduler.store.models import Session, Status, Turn
from scheduler.store.policy import load_policy
from scheduler.store.sessions import class_expr

STALE_AFTER = timedelta(minutes=5)  # recomputed this often even when nothing in the queue changed
WAITING_READ = 5000  # waiters forecast at most (the queue's front)
_FORECASTABLE = queue_ladder.BUDGET  # eligible, waiting on a slot, or on money: the gate and the queue decide


def _rank(cls: str, precedence: int, created: datetime, sid: int) -> tuple[int, int, float, int]:
    return (0 if cls == SchedulingClass.PRIORITY.value else 1, -precedence, created.timestamp(), sid)


def _blocked(hold: str | None, pause: str | None, park: str | None) -> bool:
    """Something beyond the gate and the queue holds it: no forecast."""
    for reason in (hold, pause, park):
        if reason is None or reason in failures.RETRY_HOLD_REASONS:
            continue
        if queue_ladder.severity(reason) > _FORECASTABLE and reason not in ("wake_me_up_later", "asleep"):
            return True
    return False


def _work(ctx: Context, rates: dict[str, float], row: tuple[Any, ...]) -> Work:
    """A session's columns (id, class, precedence, created, runtime, weight, capacity, multiplier,
    genesis) as the forecast's Work."""
    sid, cls, precedence, created, runtime, weight, capacity, multiplier, genesis = row[:9]
    if runtime not in rates:
        rates[runtime] = burn_rate(ctx, runtime)
    return Work(sid, _rank(cls, precedence, created, sid), cls == SchedulingClass.SPOT.value,
                ctx.runtime(runtime).spends_quota, rates[runtime], runtime, weight, capacity, multiplier,
                kind=kind_of(str(genesis), str(runtime)))


def outlook(db: DBSession, ctx: Context, policy: PolicyView, reading: QuotaReading | None, now: datetime) -> Outlook:
    """The present state, as the forecast runs it forward."""
    resolved = class_expr(policy)
    rates: dict[str, float] = {}
    running = []
    for row in core(db, sa_select(
        col(Session.id), resolved, col(Session.precedence), col(Session.created_at), col(Turn.runtime),
        col(Session.weight), col(Session.capacity), col(Session.capacity_multiplier), col(Session.genesis),
        col(Turn.started_at),
    ).join(Turn, col(Turn.session_id) == col(Session.id)).where(col(Turn.status) == "running")):
        w = _work(ctx, rates, tuple(row))
        running.append(Work(**{**w.__dict__, "started_at": row[9] or now}))
    waiting = []
    for row in core(db, sa_select(
        col(Session.id), resolved, col(Session.precedence), col(Session.created_at), col(Session.runtime),
        col(Session.weight), col(Session.capacity), col(Session.capacity_multiplier), col(Session.genesis),
        col(Session.hold_reason), col(Session.pause_reason), col(Session.park_reason), col(Session.wake_at),
        col(Session.hold_retry_at),
    ).where(col(Session.status) == Status.WAITING.value, col(Session.bookkeeping).is_(False)).limit(WAITING_READ)):
        hold, pause, park, wake, retry = row[9:]
        if _blocked(hold, pause, park):
            continue
        w = _work(ctx, rates, tuple(row))
        later = [at for at in (wake, retry if hold in failures.RETRY_HOLD_REASONS else None) if at and at > now]
        waiting.append(Work(**{**w.__dict__, "not_before": max(later)}) if later else w)
    turn_minutes, follow_up, arrivals = _history(db, ctx, policy, now)
    demand = learned(db, now, lambda runtime: ctx.runtime(runtime).spends_quota) if policy.demand_pacing else None
    return Outlook(
        policy, ctx.limits.agent_workers, windows_from(reading), tuple(running), tuple(waiting),
        turn_minutes, follow_up, arrivals,
        learned=demand is not None, demand_usd_per_hour=demand.arrivals_per_hour if demand is not None else None,
    )


def _history(db: DBSession, ctx: Context, policy: PolicyView, now: datetime) -> tuple[
    dict[str, tuple[float, ...]], dict[str, float], Arrivals | None
]:
    """Turn lengths and follow-up shares per runtime, and the priority arrivals, from the history
    kept per hour (`store.forecast_rows.history`)."""
    until = now.replace(minute=0, second=0, microsecond=0)
    found = history(db, policy, until)
    arrivals = None
    if found.first is not None and found.priority_runtimes:
        # `arrival_profile` at a dollar a session: priority sessions per hour of week, smoothed as the pace's are.
        per_hour = arrival_profile(ArrivalHistory(found.first, until, found.priority_counts, {"priority": 1.0}))
        runtime = found.priority_runtimes.most_common(1)[0][0]
        if per_hour is not None:
            arrivals = Arrivals(per_hour, runtime, burn_rate(ctx, runtime), ctx.runtime(runtime).spends_quota)
    return found.turn_minutes, found.follow_up, arrivals


def forecast_now(ctx: Context, *, seed: int = 0) -> dict[int, Forecast]:
    """Every forecastable waiter's expected start, from the store and the quota as they are now.
    The quota is read before the read transaction opens (`engine.fleet`)."""
    now = ctx.clock.now()
    return forecast_from(ctx, read_quota(ctx, now), now, seed=seed)


def forecast_from(
    ctx: Context, reading: QuotaReading | None, now: datetime, *, seed: int = 0, targets: frozenset[int] | None = None
) -> dict[int, Forecast]:
    """`forecast_now` on a reading the caller took (`pacer simulate` reads its meter without
    counting a read); `targets`: only these waiters' forecasts."""
    with session_scope(ctx.ports.engine) as db:
        policy = load_policy(db)
        state = outlook(db, ctx, policy, reading, now)
    if not state.waiting:
        return {}
    return forecast(state, now, seed=seed, targets=targets)


# Per engine (held weakly: a test's engine gone, its id may be another's): the state last forecast, and when.
_LAST: weakref.WeakKeyDictionary[Any, tuple[tuple[object, ...], datetime]] = weakref.WeakKeyDictionary()
_STATE = sa_select(func.count(), func.max(col(Session.updated_at))).where(
    col(Session.status).in_([Status.WAITING.value, Status.RUNNING.value])
)


def refresh(ctx: Context) -> int | None:
    """Recompute and keep every waiter's forecast when the queue or the fleet changed, or the last
    one is STALE_AFTER old; returns how many were kept, None when nothing needed recomputing."""
    now = ctx.clock.now()
    with session_scope(ctx.ports.engine) as db:
        waiting_or_running, touched = core(db, _STATE).one()
    state: tuple[object, ...] = (waiting_or_running, touched)
    last = _LAST.get(ctx.ports.engine)
    if last is not None and last[0] == state and now - last[1] < STALE_AFTER:
        return None
    found = forecast_now(ctx)
    with session_scope(ctx.ports.engine) as db:
        kept = replace_all(db, [
            {"session_id": f.session_id, "median": f.median, "low": f.low, "high": f.high, "draws": f.draws,
             "computed_at": now}
            for f in found.values()
        ])
    _LAST[ctx.ports.engine] = (state, now)
    return kept
