"""A scheduler in virtual time over a real SQLite file: the real turn engine, the real gate,
the VirtualDeferrer and a virtual worker pool. The quota source is a small fake of the
QuotaSource port whose windows a test sets directly.

`context` is the one place a test makes a Context, and `wired=True` is the one way to give it
every admission check and hook production installs (`scheduler.wiring.install`); `build` is the
usual scene on top of it."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from scheduler.context import Context, Limits, Ports, Runtime, TurnWorkers
from scheduler.jobs import targets
from scheduler.ports import Clock, Deferrer, Notifier, QuotaReading, QuotaSource, WindowReading
from scheduler.store.db import session_scope
from scheduler.store.models import Session
from scheduler.store.policy import change_policy
from scheduler.store.sessions import NewSession, create_session
from scheduler.testing import VirtualClock, VirtualDeferrer, VirtualWorkers
from scheduler.wiring import install

# Where every virtual clock starts: a Monday morning.
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@dataclass
class SetQuota:
    """The windows as a test sets them: dollars spent of a calibrated capacity."""

    clock: VirtualClock
    spent_5h: float = 0.0
    capacity_5h: float = 1000.0
    spent_7d: float = 0.0
    capacity_7d: float = 10000.0
    reset_5h: datetime | None = None
    reset_7d: datetime | None = None
    warned_5h: bool = False  # the provider's allowed_warning on the five-hour window
    reads: int = field(default=0)

    def read(self, now: datetime) -> QuotaReading:
        self.reads += 1
        r5 = self.reset_5h or now + timedelta(hours=4)
        r7 = self.reset_7d or now + timedelta(days=5)
        return QuotaReading(windows=[
            WindowReading(
                "5h", 5 * 3600, self.spent_5h / self.capacity_5h, r5, self.capacity_5h, self.spent_5h,
                warned=self.warned_5h,
            ),
            WindowReading("7d", 7 * 86400, self.spent_7d / self.capacity_7d, r7, self.capacity_7d, self.spent_7d),
        ])

    def spend_out(self) -> None:
        self.spent_5h = self.capacity_5h


def context(
    engine: Engine,
    clock: Clock,
    deferrer: Deferrer,
    workers: TurnWorkers,
    *,
    wired: bool,
    quota: QuotaSource | None = None,
    notifier: Notifier | None = None,
    runtimes: dict[str, Runtime] | None = None,
    rng: random.Random | None = None,
) -> Context:
    """A Context with production's alarm targets and the parts a test names; what it leaves out
    keeps the Context's own default."""
    named = {"quota": quota, "notifier": notifier}
    ports = Ports(
        engine=engine,
        clock=clock,
        deferrer=deferrer,
        workers=workers,
        **{k: v for k, v in named.items() if v is not None},
    )
    limits = Limits() if runtimes is None else Limits(runtimes=runtimes)
    ctx = Context(ports=ports, limits=limits, jobs=targets(), **({} if rng is None else {"rng": rng}))
    return install(ctx) if wired else ctx


def build(
    engine: Engine,
    clock: VirtualClock,
    *,
    wired: bool = False,
    max_sessions: int = 2,
    turn_minutes: float = 20,
    burn: float = 0.1,
    seed: int = 7,
) -> tuple[Context, VirtualDeferrer, VirtualWorkers, SetQuota]:
    """The usual scene: turns of `turn_minutes` burning `burn` dollars a minute on the one runtime
    "echo", windows the test sets, quota read afresh each time, a fleet of `max_sessions`."""
    deferrer = VirtualDeferrer(clock)
    workers = VirtualWorkers(
        clock, deferrer, duration=lambda _r: timedelta(minutes=turn_minutes), burn_per_min=lambda _r: burn
    )
    quota = SetQuota(clock)
    ctx = context(
        engine,
        clock,
        deferrer,
        workers,
        wired=wired,
        quota=quota,
        runtimes={"echo": Runtime("echo", True, burn)},
        rng=random.Random(seed),
    )
    with session_scope(engine) as db:
        change_policy(db, {"max_sessions": max_sessions}, surface="test", actor=None, now=clock.now())
    return ctx, deferrer, workers, quota


def new(ctx: Context, *, prompt: str = "do it", **kw) -> int:
    kw.setdefault("genesis", "api")
    with session_scope(ctx.engine) as db:
        s = create_session(db, NewSession(**kw), now=ctx.clock.now())
        s.prompt = prompt
        db.add(s)
        db.flush()
        return s.id or 0


def row(ctx: Context, session_id: int) -> Session:
    with session_scope(ctx.engine) as db:
        s = db.get(Session, session_id)
        assert s is not None
        return s
