"""The composition root's state: settings, database, clock, deferrer, workers and the Context the
scheduler runs on, built once per process.

APScheduler pickles a job as a reference to `bot.jobs.run` plus a target name and ids, so jobs
find the live Context through `current()` rather than carrying it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from bot.notify import CompositeNotifier, LogNotifier
from bot.settings import Settings
from scheduler import db as dbmod
from scheduler.clock import SystemClock
from scheduler.context import Context, WorkerPool
from scheduler.policy import ensure_policy
from scheduler.ports import Clock, Deferrer

log = logging.getLogger("pacer")

_current: Pacer | None = None
_lock = threading.Lock()

BURN_REFRESH_MINUTES = 5


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
        return dbmod.session_scope(self.engine)


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
    workers: WorkerPool | None = None,
    migrate: bool = True,
) -> Pacer:
    from bot.adapters import build_pool, build_quota_source, runtimes_from_settings
    from scheduler import wiring

    engine = dbmod.make_engine(settings.database_url)
    if migrate:
        dbmod.migrate(settings.database_url)
    with dbmod.session_scope(engine) as db:
        ensure_policy(db, policy_defaults(settings))
    scheduler = None
    job_runner = None
    if deferrer is None:
        from bot import jobs
        from integrations.apscheduler_deferrer import APSchedulerDeferrer, build_scheduler

        scheduler = build_scheduler(engine)
        deferrer = APSchedulerDeferrer(scheduler)
        job_runner = jobs.run
    ctx = Context(
        engine=engine,
        clock=clock or SystemClock(),
        deferrer=deferrer,
        workers=workers or build_pool(settings),
        quota=build_quota_source(settings, engine),
        notifier=CompositeNotifier(LogNotifier()),
        agent_workers=settings.agent_workers,
        runtimes=runtimes_from_settings(settings),
        job_runner=job_runner,
    )
    refresh_burn(ctx, settings)
    wiring.install(ctx)
    pacer = Pacer(settings=settings, engine=engine, clock=ctx.clock, deferrer=deferrer, ctx=ctx, scheduler=scheduler)
    install(pacer)
    return pacer


def refresh_burn(ctx: Context, settings: Settings) -> None:
    """Burn rates from the turn history; the configured echo rate until there is history."""
    from bot.adapters import fallback_burn
    from integrations.quota.history import load_burn_table

    try:
        with dbmod.session_scope(ctx.engine) as db:
            ctx.burn = load_burn_table(db, fallback_burn(settings))
    except Exception:
        log.exception("burn rates could not be read; keeping the previous table")


def refresh_burn_job() -> None:
    pacer = current()
    refresh_burn(pacer.ctx, pacer.settings)


def start(pacer: Pacer) -> None:
    """Become the scheduler's leader (or stand by), then run its alarms and sweeps."""
    from bot.leader import Leadership

    leadership = Leadership(pacer.engine, lambda: lead(pacer))
    pacer.extras["leadership"] = leadership
    leadership.start()


def lead(pacer: Pacer) -> None:
    """Start the alarms and sweeps, then repair what a crash left behind."""
    from bot import jobs
    from scheduler.lifecycle import recover
    from scheduler.sweeps import hold_sweep
    from scheduler.wiring import PERIODIC

    if pacer.scheduler is not None:
        pacer.scheduler.start()
        for name, interval in PERIODIC.items():
            pacer.scheduler.add_job(jobs.run, "interval", args=[name], id=f"periodic:{name}",
                                    replace_existing=True, seconds=interval.total_seconds())
        pacer.scheduler.add_job(refresh_burn_job, "interval", id="periodic:burn_refresh",
                                replace_existing=True, minutes=BURN_REFRESH_MINUTES)
        from bot import triggers, triggers_file

        # Triggers as code, once the scheduler runs (an unchanged cron job keeps its stored
        # next run); then triggers written on a standby replica reach the cron jobs each minute.
        triggers_file.install(pacer)
        pacer.scheduler.add_job(triggers.resync_job, "interval", id="periodic:trigger_resync",
                                replace_existing=True, minutes=1)
        log.info("scheduler started with sweeps: %s", ", ".join(sorted(PERIODIC)))
    recover(pacer.ctx)
    hold_sweep(pacer.ctx)


def stop(pacer: Pacer) -> None:
    leadership = pacer.extras.get("leadership")
    if leadership is not None:
        leadership.stop()
    if pacer.scheduler is not None and pacer.scheduler.running:
        pacer.scheduler.shutdown(wait=False)
        log.info("scheduler stopped")
    shutdown = getattr(pacer.ctx.workers, "shutdown", None)
    if shutdown is not None:
        shutdown(wait=False)


def install(pacer: Pacer) -> None:
    global _current
    with _lock:
        _current = pacer


def current() -> Pacer:
    if _current is None:
        raise RuntimeError("Pacer's runtime is not built in this process")
    return _current
