"""Everything a scheduler operation needs from the outside world, passed in as one value.

A Context holds its `Ports` (the database engine, clock, deferrer, workers, quota source,
notifier, dispatcher), its `Limits` (workers, runtimes, the early notice, the turn lease), its
`PlugIns` (typed lists: admission checks, before-start and turn-finished hooks, fleet event
handlers, notice listeners) and the alarm targets by name (`scheduler.alarms`).

Production builds it in `bot/runtime/process.py`; tests and the simulator build it with a VirtualClock,
a VirtualDeferrer and VirtualWorkers; `scheduler.wiring.install` fills the plug-ins. No operation
reads a global.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Engine, event
from sqlmodel import Session as DBSession

from scheduler import alarms
from scheduler.errors import AlarmInTransaction
from scheduler.ports import Clock, Deferrer, Notifier, QuotaSource, TurnRequest, TurnResult

if TYPE_CHECKING:  # the plug-ins' arguments come from the layers above, which import this one
    from scheduler.engine.attempt import Block, Work
    from scheduler.rules.burn import BurnTable
    from scheduler.rules.failures import NextStep
    from scheduler.rules.gate import Decision
    from scheduler.steering.firing import Fired
    from scheduler.store.models import Session, Turn

log = logging.getLogger("pacer.notify")


_open = threading.local()


def in_transaction(engine: Engine) -> bool:
    """Whether this thread holds a transaction open on `engine`.

    An alarm armed from inside one deadlocks on SQLite: APScheduler's job store shares the
    file, opens a second write transaction on it and waits behind the first, which is waiting
    for the alarm — 30 seconds, then `database is locked`. Alarms are armed after commit."""
    return bool(getattr(_open, "depth", {}).get(id(engine)))


def track_transactions(engine: Engine) -> None:
    """Count this thread's open transactions on `engine` (`make_engine` calls this once)."""
    def depth() -> dict[int, int]:
        if not hasattr(_open, "depth"):
            _open.depth = {}
        table: dict[int, int] = _open.depth
        return table

    key = id(engine)

    @event.listens_for(engine, "begin")
    def _begun(_conn: Any) -> None:
        d = depth()
        d[key] = d.get(key, 0) + 1

    def _ended(_conn: Any) -> None:
        d = depth()
        d[key] = max(0, d.get(key, 0) - 1)

    event.listen(engine, "commit", _ended)
    event.listen(engine, "rollback", _ended)


class TurnWorkers(Protocol):
    """Executes turns off the caller's thread and reports each result exactly once."""

    def submit(self, request: TurnRequest, on_done: Callable[[TurnResult], None]) -> None: ...

    def halt(self, turn_id: int) -> bool:
        """Stop a running turn; its on_done then reports Outcome.HALTED."""
        ...


class TurnDispatcher(Protocol):
    """Hands started turns to worker machines inside the transaction that decides them, so a
    turn and the job that runs it commit together or not at all (`integrations.turn_queue`).
    A Context without one runs its turns on its own workers after commit (`Effects.apply`)."""

    def enqueue(self, db: DBSession, turn_id: int, session_id: int) -> int:
        """Defer the turn's job on `db`'s transaction; its job id."""
        ...

    def halt(self, db: DBSession, job_id: int) -> bool:
        """Stop the job on `db`'s transaction: True when it had not started (cancelled, so
        nobody will report its turn), False when its worker is asked to halt the runner."""
        ...

    def end(self, db: DBSession, job_id: int) -> None:
        """The job's turn was given back by recovery: the job never runs (again)."""
        ...

    def stalled(self, db: DBSession) -> list[int]:
        """End the jobs whose worker stopped beating; their ids."""
        ...


class NullNotifier:
    def notify(self, event: str, context: Mapping[str, Any]) -> None:
        return None


@dataclass
class Runtime:
    """What a runtime (a kind of agent) costs and whether it spends quota."""

    name: str
    spends_quota: bool = True
    default_burn_per_min: float = 0.05


class AdmissionCheck(Protocol):
    """A check beyond the gate (operator holds, queue holds, groups, prerequisites, ...): the
    Block that holds `session` now, or None. The first check that says no is the reason shown."""

    def __call__(self, db: DBSession, session: Session, now: datetime, /) -> Block | None: ...


class BeforeStart(Protocol):
    """Runs inside the transaction that starts an admitted turn (preemption, a cost cap's alarm)."""

    def __call__(self, work: Work, session: Session, decision: Decision, /) -> None: ...


class TurnFinished(Protocol):
    """Sees a finished turn's next step first; True when it took charge of the session's next
    state (a queue hold), False to leave it with `completion.settle`."""

    def __call__(self, work: Work, session: Session, turn: Turn, result: TurnResult, step: NextStep, /) -> bool: ...


class FleetEventHandler(Protocol):
    """Fires what a fleet event (the top-up sweep's `no_sessions_in_progress`) starts."""

    def __call__(self, ctx: Context, event: str, facts: Mapping[str, Any], /) -> list[Fired]: ...


class Listener(Protocol):
    """Hears every notice, after the notifier, in this process."""

    def __call__(self, event: str, context: Mapping[str, Any], /) -> None: ...


@dataclass
class Ports:
    """The outside world, each part behind a port (`scheduler.ports`)."""

    engine: Engine
    clock: Clock
    deferrer: Deferrer
    workers: TurnWorkers
    quota: QuotaSource | None = None
    notifier: Notifier = field(default_factory=NullNotifier)
    # Worker machines run the turns (procrastinate on PostgreSQL); None: this process's workers.
    dispatcher: TurnDispatcher | None = None


@dataclass
class Limits:
    """How much the process may run and what a runtime costs."""

    agent_workers: int = 12
    runtimes: dict[str, Runtime] = field(default_factory=lambda: {"echo": Runtime("echo", True, 1.5)})
    notice_minutes: float = 30.0  # tell running spot sessions a window's spot budget ends this soon (0: never)
    # For how long a start vouches for a turn before a heartbeat must renew it
    # (`scheduler.engine.leases`). None (tests, the simulator, where nothing renews one):
    # recovery may take any running turn.
    turn_lease: timedelta | None = None


@dataclass
class PlugIns:
    """The parts `scheduler.wiring.install` plugs in, each list in the order it runs."""

    admission_checks: list[AdmissionCheck] = field(default_factory=list)
    before_start: list[BeforeStart] = field(default_factory=list)
    turn_finished: list[TurnFinished] = field(default_factory=list)
    fleet_events: list[FleetEventHandler] = field(default_factory=list)
    listeners: list[Listener] = field(default_factory=list)


@dataclass
class Context:
    """What a scheduler operation needs: the ports, the limits, the plug-ins and the alarm
    targets. `engine` and `clock`, asked by nearly every operation, are reachable directly."""

    ports: Ports
    limits: Limits = field(default_factory=Limits)
    plugins: PlugIns = field(default_factory=PlugIns)
    # The alarm targets by name (`scheduler.alarms`), each called as target(ctx, *args):
    # `scheduler.jobs.targets()`, given by whoever builds the context.
    jobs: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    # Runs a named alarm target: `job_runner(name, *args)`. Production passes the module-level
    # `bot.jobs.run` (APScheduler pickles a reference to it, and ids only); left None, a
    # closure over this context runs the target directly (virtual time, tests).
    job_runner: Callable[..., Any] | None = None
    rng: random.Random = field(default_factory=random.Random)
    burn: BurnTable | None = None  # refreshed from turn history
    # Who runs the turns this process starts (`scheduler.engine.leases`).
    owner: str | None = None
    installed: bool = False  # scheduler.wiring.install has registered its parts

    # The alarms this process is running now, as (target, args): APScheduler takes a one-shot
    # alarm out of its job store when it starts running it, so "no alarm stored" alone cannot
    # tell a lost re-check from one in flight (the hold sweep asks both).
    running_alarms: set[tuple[str, str]] = field(default_factory=set)

    @property
    def engine(self) -> Engine:
        return self.ports.engine

    @property
    def clock(self) -> Clock:
        return self.ports.clock

    def run_job(self, name: str, *args: Any) -> Any:
        target = self.jobs.get(name)
        if target is None:
            raise LookupError(f"no alarm target {name!r}: build the Context with jobs=scheduler.jobs.targets()")
        key = (name, repr(args))  # args may be unhashable (a session event's facts)
        self.running_alarms.add(key)
        try:
            return target(self, *args)
        finally:
            self.running_alarms.discard(key)

    def is_running_alarm(self, name: str, *args: Any) -> bool:
        return (name, repr(args)) in self.running_alarms

    def _outside_transaction(self, what: str) -> None:
        if in_transaction(self.engine):
            raise AlarmInTransaction(
                f"{what} inside an open database transaction; apply it after commit (scheduler.engine.effects)"
            )

    def schedule(self, job_id: str, at: Any, name: str, *args: Any) -> None:
        """Arm the alarm `job_id` to run the named target with `args` (ids only) at `at`."""
        self._outside_transaction(f"arming alarm {job_id}")
        if self.job_runner is not None:
            self.ports.deferrer.schedule(job_id, at, self.job_runner, name, *args)
        else:
            self.ports.deferrer.schedule(job_id, at, self.run_job, name, *args)

    def cancel_alarm(self, job_id: str) -> bool:
        self._outside_transaction(f"cancelling alarm {job_id}")
        return self.ports.deferrer.cancel(job_id)

    def alarm_at(self, job_id: str) -> Any:
        """When the alarm `job_id` fires, or None when none is armed."""
        self._outside_transaction(f"reading alarm {job_id}")
        return self.ports.deferrer.next_run(job_id)

    def runtime(self, name: str) -> Runtime:
        return self.limits.runtimes.get(name) or Runtime(name)

    def emit(self, event: str, **context: Any) -> None:
        """Tell people (threads, issues, the ops channel) and any in-process listener."""
        self._outside_transaction(f"notice {event}")
        for listener in [self.ports.notifier.notify, *self.plugins.listeners]:
            try:
                listener(event, context)
            except Exception:  # a failed notice never stops the scheduler
                log.exception("notice %s failed", event)


QUEUE_PASS_JOB = "queue_pass"  # one id: requests made while one is pending coalesce into that pass


def request_queue_pass(ctx: Context) -> None:
    """Something changed that could free work: the queue looks again now."""
    ctx.schedule(QUEUE_PASS_JOB, ctx.clock.now(), alarms.QUEUE_PASS)
