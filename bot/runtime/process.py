"""The composition root's state: settings, database, clock, deferrer, workers and the Context the
scheduler runs on, built once per process.

APScheduler pickles a job as a reference to `bot.jobs.run` plus a target name and ids, so `build`
installs the Context in `bot.jobs`, and adds the face's own periodic targets (burn rates, cron
jobs for triggers) to the scheduler's table rather than giving APScheduler functions of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from bot import jobs
from bot.config.settings import Settings
from bot.runtime.adapters import (
    build_dispatcher,
    build_pool,
    build_quota_source,
    build_workspaces,
    fallback_burn,
    runtimes_from_settings,
)
from bot.runtime.leader import Leadership
from bot.runtime.notify import CompositeNotifier, LogNotifier, session_fields
from bot.triggers import file as triggers_file
from integrations.apscheduler_deferrer import APSchedulerDeferrer, build_scheduler
from integrations.quota.history import load_burn_table
from integrations.runners.custody import end_unsupervised
from integrations.runners.workspace import WorkspaceJanitor, sweep
from integrations.schedules import sync_schedules
from integrations.shared_alarms import AlarmListener, SharedDeferrer
from integrations.turn_leases import LeasedPool
from integrations.turn_progress import ProgressBook
from scheduler import wiring
from scheduler.clock import SystemClock
from scheduler.context import Context, Limits, Ports, TurnWorkers
from scheduler.engine.leases import owner_id
from scheduler.engine.lifecycle import recover, recover_lost_turns
from scheduler.engine.recheck_sweep import recheck_sweep
from scheduler.front import ReusedQuotaSource, ensure_policy, make_engine, refresh_forecasts, session_scope
from scheduler.front import migrate as migrate_schema
from scheduler.ports import Clock, Deferrer

log = logging.getLogger("pacer")

BURN_REFRESH = "burn_refresh"
BURN_REFRESH_MINUTES = 5
TRIGGER_RESYNC = "trigger_resync"
TRIGGER_RESYNC_MINUTES = 1
WORKSPACE_SWEEP = "workspace_sweep"
WORKSPACE_SWEEP_MINUTES = 60
LEASE_SWEEP = "lease_sweep"  # every half lease: turns whose owner stopped renewing them
# pacer.extras key: {alarm target: interval} a surface adds (the GitHub catch-up), run by the
# leader at its election and then every interval.
LEADER_JOBS = "leader_jobs"
FORECAST_REFRESH = "forecast_refresh"  # the start-time forecasts, on a change of the queue (`steering.forecasting`)
FORECAST_REFRESH_SECONDS = 30  # N: at most one forecast per this, per process


@dataclass
class Pacer:
    settings: Settings
    engine: Engine
    clock: Clock
    deferrer: Deferrer
    ctx: Context
    scheduler: Any = None  # the APScheduler instance when this process runs the alarms
    extras: dict[str, Any] = field(default_factory=dict)

    def db(self) -> Any:
        return session_scope(self.engine)


def policy_defaults(settings: Settings) -> dict[str, Any]:
    return {
        "gating_enabled": settings.gating,
        "reserve_5h_pct": settings.reserve_5h_pct,
        "reserve_7d_pct": settings.reserve_7d_pct,
        "max_sessions": settings.max_sessions,
        "preemption_enabled": settings.preemption,
    }


def build(
    settings: Settings,
    *,
    clock: Clock | None = None,
    deferrer: Deferrer | None = None,
    workers: TurnWorkers | None = None,
    migrate: bool = True,
) -> Pacer:
    engine = make_engine(settings.database_url)
    if migrate:
        migrate_schema(settings.database_url)
    with session_scope(engine) as db:
        ensure_policy(db, policy_defaults(settings))
    scheduler = None
    job_runner = None
    if deferrer is None:
        scheduler = build_scheduler(engine)
        deferrer = SharedDeferrer(APSchedulerDeferrer(scheduler), scheduler, engine)
        job_runner = jobs.run
    notifier = CompositeNotifier(LogNotifier(session_fields(engine)))
    if settings.runner != "echo":
        notifier.add(WorkspaceJanitor(engine, build_workspaces(settings)))  # an archived session's worktree goes
    clock = clock or SystemClock()
    owner, lease = None, None
    if workers is None:  # this process runs turns: it owns them and its heartbeat renews their leases
        if settings.runner != "echo":
            end_unsupervised()  # agents a killed Pacer on this machine left behind, before any turn is given back
        owner, lease = owner_id(), timedelta(seconds=settings.turn_lease_seconds)
        progress = ProgressBook(engine, owner, notifier.notify, clock.now)  # live progress, to every notifier
        workers = LeasedPool(build_pool(settings, engine=engine), engine, owner, lease, clock.now, progress=progress)
    ports = Ports(
        engine=engine,
        clock=clock,
        deferrer=deferrer,
        workers=workers,
        quota=ReusedQuotaSource(build_quota_source(settings, engine)),  # a burst of decisions shares a reading
        notifier=notifier,
        dispatcher=build_dispatcher(settings),
    )
    limits = Limits(
        agent_workers=settings.agent_workers,
        runtimes=runtimes_from_settings(settings),
        notice_minutes=settings.notice_minutes,
        turn_lease=lease,
    )
    ctx = Context(ports=ports, limits=limits, job_runner=job_runner, owner=owner)
    refresh_burn(ctx, settings)
    wiring.install(ctx)
    pacer = Pacer(settings=settings, engine=engine, clock=ctx.clock, deferrer=deferrer, ctx=ctx, scheduler=scheduler)
    ctx.jobs = {**ctx.jobs, **periodic_targets(pacer)}
    jobs.install(ctx)
    return pacer


def periodic_targets(pacer: Pacer) -> dict[str, Callable[[Context], object]]:
    """The face's alarm targets, run through `bot.jobs.run` beside the scheduler's own."""

    def burn_refresh(ctx: Context) -> None:
        refresh_burn(ctx, pacer.settings)

    def trigger_resync(ctx: Context) -> None:
        # Triggers written on another replica (which runs no scheduler) reach the cron jobs
        # within one interval.
        if pacer.scheduler is not None:
            sync_schedules(pacer.scheduler, ctx.engine)

    def workspace_sweep(ctx: Context) -> None:
        ttl = timedelta(hours=pacer.settings.workspace_ttl)
        sweep(ctx.engine, build_workspaces(pacer.settings), ctx.clock.now(), ttl)

    return {
        BURN_REFRESH: burn_refresh, TRIGGER_RESYNC: trigger_resync, WORKSPACE_SWEEP: workspace_sweep,
        LEASE_SWEEP: recover_lost_turns, FORECAST_REFRESH: refresh_forecasts,
    }


def refresh_burn(ctx: Context, settings: Settings) -> None:
    """Burn rates from the turn history; the configured echo rate until there is history."""
    try:
        with session_scope(ctx.engine) as db:
            ctx.burn = load_burn_table(db, fallback_burn(settings))
    except Exception:
        log.exception("burn rates could not be read; keeping the previous table")


def start(pacer: Pacer) -> None:
    """Become the scheduler's leader (or stand by), then run its alarms and sweeps. A standby's
    scheduler runs paused: alarms armed through it reach the shared job store, and only the
    leader fires them (`integrations.shared_alarms`)."""
    if pacer.scheduler is not None and not pacer.scheduler.running:
        pacer.scheduler.start(paused=True)
    leadership = Leadership(pacer.engine, lambda: lead(pacer), on_deposed=lambda: step_down(pacer))
    pacer.extras["leadership"] = leadership
    leadership.start()


def lead(pacer: Pacer) -> None:
    """Start the alarms and sweeps, then repair what a crash left behind."""
    if pacer.scheduler is not None:
        if pacer.scheduler.running:
            pacer.scheduler.resume()
        else:
            pacer.scheduler.start()
        listener = AlarmListener(pacer.engine, pacer.scheduler.wakeup)
        pacer.extras["alarm_listener"] = listener
        listener.start()
        for name, interval in wiring.PERIODIC.items():
            _every(pacer, name, seconds=interval.total_seconds())
        _every(pacer, BURN_REFRESH, minutes=BURN_REFRESH_MINUTES)
        _every(pacer, LEASE_SWEEP, seconds=pacer.settings.turn_lease_seconds / 2)
        # Triggers written on a standby replica reach the cron jobs each minute.
        _every(pacer, TRIGGER_RESYNC, minutes=TRIGGER_RESYNC_MINUTES)
        for name, every in pacer.extras.get(LEADER_JOBS, {}).items():  # at once, then every interval
            _every(pacer, name, seconds=every.total_seconds(), next_run_time=datetime.now(UTC))
        _every(pacer, FORECAST_REFRESH, seconds=FORECAST_REFRESH_SECONDS)
        if pacer.settings.runner != "echo":  # worktrees of finished sessions go after PACER_WORKSPACE_TTL
            _every(pacer, WORKSPACE_SWEEP, minutes=WORKSPACE_SWEEP_MINUTES)
        # Triggers as code, once the scheduler runs (an unchanged cron job keeps its stored
        # next run). Reading the cron jobs reads every stored job, so every periodic one is
        # rewritten first, whatever function an earlier version stored it under.
        triggers_file.install(pacer)
        log.info("scheduler started with sweeps: %s", ", ".join(sorted(wiring.PERIODIC)))
    recover(pacer.ctx)
    recheck_sweep(pacer.ctx)


def step_down(pacer: Pacer) -> None:
    """The lock is lost: stop firing alarms (another process may lead by now) and stand by as a
    standby does, arming alarms into the shared store; `lead` resumes it if elected again."""
    if pacer.scheduler is not None and pacer.scheduler.running:
        pacer.scheduler.pause()
    listener = pacer.extras.pop("alarm_listener", None)
    if listener is not None:
        listener.stop()
    log.warning("this process no longer leads the scheduler; standing by")


def _every(pacer: Pacer, name: str, **interval: Any) -> None:
    """Run the alarm target `name` through `bot.jobs.run` at a fixed interval."""
    pacer.scheduler.add_job(jobs.run, "interval", args=[name], id=f"periodic:{name}", replace_existing=True, **interval)


def stop(pacer: Pacer) -> None:
    leadership = pacer.extras.get("leadership")
    if leadership is not None:
        leadership.stop()
    listener = pacer.extras.get("alarm_listener")
    if listener is not None:
        listener.stop()
    if pacer.scheduler is not None and pacer.scheduler.running:
        pacer.scheduler.shutdown(wait=False)
        log.info("scheduler stopped")
    shutdown = getattr(pacer.ctx.ports.workers, "shutdown", None)
    if shutdown is not None:
        shutdown(wait=False)
