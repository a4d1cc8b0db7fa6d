"""Building the gate's snapshot from the database and a quota reading.

The fleet is the turns a worker is executing now (Turn.status == running) — the only population
the ceilings count (seed 001, "What the ceiling counts"). A waiting session, a held one, a
paused one and one asleep on a wake have no running turn and so take nothing.

Read the quota BEFORE opening a write transaction: a quota source may open its own connection,
and on SQLite a second connection waits for the first one's write lock.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy import func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.context import Context
from scheduler.ports import QuotaReading
from scheduler.rules.demand import DEFAULT_TURN_MINUTES, Deferred, Demand, RunningTurn, WaitingGroup
from scheduler.rules.genesis import SchedulingClass
from scheduler.rules.snapshot import Asking, FleetTurn, PolicyView, Snapshot, WindowState
from scheduler.store.demand_reads import learned, running_turns, waiting_by_runtime
from scheduler.store.models import Session, Turn
from scheduler.store.sessions import class_from, is_spot
from scheduler.store.turn_reads import running_rows

log = logging.getLogger("pacer.fleet")


def read_quota(ctx: Context, now: datetime) -> QuotaReading | None:
    """The quota windows now; None (no_snapshot, fail open) when unreadable. The composition root
    decides whether a reading is reused for a few seconds (`scheduler.quota_reuse`)."""
    if ctx.ports.quota is None:
        return None
    try:
        reading: QuotaReading | None = ctx.ports.quota.read(now)
    except Exception:  # a monitoring gap must not become an outage
        log.exception("quota source could not be read; the gate falls open")
        return None
    return reading


def windows_from(reading: QuotaReading | None) -> tuple[WindowState, ...] | None:
    if reading is None or not reading.windows:
        return None
    states = []
    for w in reading.windows:
        calibrated = w.capacity_usd is not None and w.capacity_usd > 0
        capacity = float(w.capacity_usd) if calibrated else 1.0  # type: ignore[arg-type]
        if calibrated:
            spent = float(w.spent_usd) if w.spent_usd is not None else w.utilization * capacity
        else:
            spent = float(w.utilization)
        states.append(WindowState(
            w.name, timedelta(seconds=w.period_seconds), w.resets_at, capacity, spent, calibrated, reading.read_at,
            w.measured_by, w.fallback, w.using_overage, w.accounts, w.buckets,
        ))
    return tuple(states)


def burn_rate(ctx: Context, runtime: str) -> float:
    if ctx.burn is not None:
        try:
            rate = float(ctx.burn.rate(runtime))
            if rate > 0:
                return rate
        except Exception:
            log.exception("burn table lookup failed for %s", runtime)
    return ctx.runtime(runtime).default_burn_per_min


def running_fleet(db: DBSession, ctx: Context, policy: PolicyView) -> list[tuple[Session, Turn]]:
    """Every running turn with its session, whole rows (for sweeps that act on them)."""
    stmt = select(Session, Turn).join(Turn, col(Turn.session_id) == col(Session.id)).where(Turn.status == "running")
    return list(db.exec(stmt))


def running_sessions(db: DBSession) -> int:
    """Sessions with a turn a worker is running, every runtime and every class: the backlog
    top-up ceiling's count (`scheduler.rules.top_up`). The concurrency limit reads the same rows and
    counts only the runtimes that spend quota."""
    return len({sid for sid, *_ in running_rows(db)})


def waiting_for_workers(db: DBSession, workers: int) -> int:
    """Turns counted as running that no worker thread executes yet (seed 001, "What the ceiling
    counts": "N more waiting for one of the M worker slots"). A turn is running from the
    transaction that starts it, so two kinds wait: one handed to worker machines whose job no
    worker has claimed (no owner yet, `leases.claim`), and one a process's workers hold beyond its
    `workers` threads (a priority start, a runtime that spends no quota or gating off can take the
    fleet past the workers). The second reads each owner's count against this process's
    PACER_AGENT_WORKERS, which every process of a deployment shares."""
    unclaimed = db.exec(select(func.count()).select_from(Turn).where(
        col(Turn.status) == "running", col(Turn.owner).is_(None), col(Turn.job_id).is_not(None))).one()
    owned = db.exec(select(func.count()).select_from(Turn).where(
        col(Turn.status) == "running", col(Turn.owner).is_not(None)).group_by(col(Turn.owner))).all()
    return int(unclaimed) + sum(max(0, int(n) - workers) for n in owned)


def fleet_columns(db: DBSession, policy: PolicyView) -> list[tuple[int, bool, str, float]]:
    """(session id, is spot, runtime, weight) for every turn a worker is executing now."""
    fleet = []
    spot: dict[tuple[str | None, str], bool] = {}  # a fleet has a few (class, genesis) pairs, not one per turn
    for sid, own, genesis, runtime, weight in running_rows(db):
        if (own, genesis) not in spot:
            spot[own, genesis] = class_from(own, genesis, policy) is SchedulingClass.SPOT
        fleet.append((sid, spot[own, genesis], runtime, weight))
    return fleet


def build_snapshot(db: DBSession, ctx: Context, policy: PolicyView, reading: QuotaReading | None) -> Snapshot:
    rates: dict[str, float] = {}
    fleet = []
    for sid, spot, runtime, weight in fleet_columns(db, policy):
        if runtime not in rates:
            rates[runtime] = burn_rate(ctx, runtime)
        fleet.append(FleetTurn(sid, spot, ctx.runtime(runtime).spends_quota, rates[runtime], weight))
    pool = None
    if reading is not None and reading.accounts:
        from scheduler.rules.pool import pool_capacity

        pool = pool_capacity(list(reading.accounts), ctx.clock.now())
    return Snapshot(
        policy=policy,
        windows=windows_from(reading),
        fleet=tuple(fleet),
        agent_workers=ctx.limits.agent_workers,
        pool=pool,
        accounts_averaged=reading.accounts_averaged if reading else 0,
        demand=Deferred(lambda: demand_now(db, ctx)) if policy.demand_pacing else None,
    )


def demand_now(db: DBSession, ctx: Context) -> Demand | None:
    """What the windows can still be asked for (`scheduler.rules.demand`), priced at each runtime's
    burn and expected turn length; read only when the gate asks (a window ahead of its curve)."""

    def spends(runtime: str) -> bool:
        return ctx.runtime(runtime).spends_quota

    history = learned(db, ctx.clock.now(), spends)
    if history is None:
        return None
    minutes = history.turn_minutes

    def priced(runtime: str) -> tuple[float, float]:
        return burn_rate(ctx, runtime), minutes.get(runtime, DEFAULT_TURN_MINUTES)

    waiting = waiting_by_runtime(db)
    running = tuple(
        RunningTurn(priced(runtime)[0], started, priced(runtime)[1])
        for runtime, started in running_turns(db) if spends(runtime)
    )
    groups = tuple(WaitingGroup(n, *priced(runtime)) for runtime, n in (waiting or {}).items() if spends(runtime))
    return Demand(running, groups, waiting is None, history.arrivals_per_hour)


def asking_for(session: Session, ctx: Context, policy: PolicyView, *, running: bool | None = None) -> Asking:
    return Asking(
        session_id=session.id or 0,
        is_spot=is_spot(session, policy),
        already_running=session.status == "running" if running is None else running,
        spends_quota=ctx.runtime(session.runtime).spends_quota,
        burn_per_min=burn_rate(ctx, session.runtime),
        weight=session.weight,
        capacity=session.capacity,
        capacity_multiplier=session.capacity_multiplier,
    )
