"""The composition root's state: settings, database, clock, deferrer and the adapters, built once.

APScheduler pickles a job as a module-level function plus ids, so jobs find the live runtime
through `current()` rather than carrying it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from bot.settings import Settings
from scheduler import db as dbmod
from scheduler.clock import SystemClock
from scheduler.policy import ensure_policy
from scheduler.ports import Clock, Deferrer

log = logging.getLogger("pacer")

_current: Pacer | None = None
_lock = threading.Lock()


@dataclass
class Pacer:
    settings: Settings
    engine: Engine
    clock: Clock
    deferrer: Deferrer
    scheduler: Any = None  # the APScheduler instance when this process is the leader
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


def build(settings: Settings, *, clock: Clock | None = None, deferrer: Deferrer | None = None, migrate: bool = True) -> Pacer:
    engine = dbmod.make_engine(settings.database_url)
    if migrate:
        dbmod.migrate(settings.database_url)
    with dbmod.session_scope(engine) as db:
        ensure_policy(db, policy_defaults(settings))
    scheduler = None
    if deferrer is None:
        from integrations.apscheduler_deferrer import APSchedulerDeferrer, build_scheduler

        scheduler = build_scheduler(engine)
        deferrer = APSchedulerDeferrer(scheduler)
    pacer = Pacer(settings=settings, engine=engine, clock=clock or SystemClock(), deferrer=deferrer, scheduler=scheduler)
    install(pacer)
    return pacer


def install(pacer: Pacer) -> None:
    global _current
    with _lock:
        _current = pacer


def current() -> Pacer:
    if _current is None:
        raise RuntimeError("Pacer's runtime is not built in this process")
    return _current
