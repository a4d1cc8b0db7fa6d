"""Helpers for the ceiling, preemption and promotion scenarios: a harness with the wiring
installed, per-session turn lengths, and periodic sweeps in virtual time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine
from sqlmodel import col, select

from scheduler.context import Runtime
from scheduler.engine.turns import submit_turn
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Turn
from scheduler.store.policy import change_policy
from scheduler.testing import VirtualClock
from tests.support.harness import build, new

FIVE = timedelta(minutes=5)


class Scene:
    """One virtual-time scheduler with the P4 parts installed and a notice log."""

    def __init__(
        self, engine: Engine, clock: VirtualClock, *, max_sessions: int = 3, turn_minutes: float = 60, burn: float = 0.1
    ) -> None:
        self.ctx, self.deferrer, self.workers, self.quota = build(
            engine, clock, max_sessions=max_sessions, turn_minutes=turn_minutes, burn=burn, wired=True
        )
        self.ctx.limits.runtimes["codex"] = Runtime("codex", spends_quota=False, default_burn_per_min=0.0)
        self.clock = clock
        self.lengths: dict[int, float] = {}
        default = timedelta(minutes=turn_minutes)
        self.workers.duration = lambda r: (
            timedelta(minutes=self.lengths[r.session_id]) if r.session_id in self.lengths else default
        )
        self.notices: list[tuple[str, dict[str, Any]]] = []
        self.ctx.plugins.listeners.append(lambda event, context: self.notices.append((event, dict(context))))

    def session(self, *, cls: str = "spot", minutes: float | None = None, **kw: Any) -> int:
        sid = new(self.ctx, genesis=kw.pop("genesis", "api"), scheduling_class=cls, **kw)
        if minutes is not None:
            self.lengths[sid] = minutes
        return sid

    def start(self, *, cls: str = "spot", minutes: float | None = None, prompt: str = "work", **kw: Any) -> int:
        sid = self.session(cls=cls, minutes=minutes, **kw)
        sub = submit_turn(self.ctx, sid, prompt)
        assert sub.outcome == "started", (sid, sub)
        return sid

    def policy(self, **changes: Any) -> None:
        with session_scope(self.ctx.engine) as db:
            change_policy(db, changes, surface="test", actor=None, now=self.clock.now())

    def sweep(self) -> Any:
        return self.ctx.run_job("ceiling_sweep")

    def advance(self, **kw: float) -> None:
        self.deferrer.advance(timedelta(**kw))

    def every(self, name: str, interval: timedelta = FIVE, after: Callable[[Any], None] | None = None) -> None:
        """Run the named sweep every `interval` of virtual time, like APScheduler does."""

        def tick() -> None:
            result = self.ctx.run_job(name)
            if after is not None:
                after(result)
            self.deferrer.schedule(f"periodic:{name}", self.clock.now() + interval, tick)

        self.deferrer.schedule(f"periodic:{name}", self.clock.now() + interval, tick)

    def row(self, sid: int) -> Session:
        with session_scope(self.ctx.engine) as db:
            s = db.get(Session, sid)
            assert s is not None
            return s

    def running_ids(self) -> set[int]:
        with session_scope(self.ctx.engine) as db:
            return {t.session_id for t in db.exec(select(Turn).where(Turn.status == "running"))}

    def turns(self, sid: int) -> list[Turn]:
        with session_scope(self.ctx.engine) as db:
            return list(db.exec(select(Turn).where(Turn.session_id == sid).order_by(col(Turn.id))))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [c for e, c in self.notices if e == name]
