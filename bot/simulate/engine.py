"""One simulation: the real scheduler on a virtual clock, fed a scenario's demand.

Everything that decides is Pacer's own code — `submit_turn`, the gate, holds and their ladder,
the queue pass, every sweep in `scheduler.wiring.PERIODIC` on its interval, preemption, StartNow
and human-message promotion, with whatever `wiring.install` registers. What is simulated is only
the outside world: the clock (VirtualClock), the alarms (VirtualDeferrer), the store (a
SQLite database in memory), the fleet (`SimWorkerPool`), the provider's meter (`meter.py`) and the
people who create sessions, continue them and reply to them (`demand.py`).

    run = Simulation(scenario, "pacer").run()      # a Run: trace, spans, work, counters
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, update
from sqlalchemy import select as sa_select
from sqlmodel import SQLModel, col

from bot.simulate import policies
from bot.simulate.accounting import account
from bot.simulate.caps import cost_cap_figures
from bot.simulate.demand import Demand, Tracked, expand
from bot.simulate.forecasting import ForecastLog, Remembering
from bot.simulate.provider import build_meter, tally_gate
from bot.simulate.scenario import Scenario
from bot.simulate.trace import Sampler, Trace
from bot.simulate.workers import Item, SimWorkerPool
from scheduler import wiring
from scheduler.errors import PacerError
from scheduler.front import (
    CYCLING_WINDOW,
    SESSIONS,
    Context,
    CyclingEvent,
    Limits,
    NewSession,
    Ports,
    ReusedQuotaSource,
    Runtime,
    Session,
    Status,
    VirtualClock,
    VirtualDeferrer,
    class_from,
    core,
    ensure_policy,
    events_since,
    insert_session,
    job_targets,
    load_policy,
    make_engine,
    record_human_message,
    session_scope,
    submit_turn,
)
from templates import error_text

_STATUS = sa_select(col(Session.status)).where(col(Session.id) == bindparam("sid"))
SAMPLE_EVERY = timedelta(minutes=1)
FOLLOW_UP_POLL = timedelta(minutes=1)
FOLLOW_UP_POLL_MAX = timedelta(minutes=5)
PROGRESS_EVERY = timedelta(hours=1)  # of simulated time: a week is 168 steps of a progress bar
ACTOR = "simulated-human"


@dataclass
class Run:
    scenario: Scenario
    policy: str
    tracked: dict[int, Tracked]
    trace: Trace
    pool: SimWorkerPool
    jobs: Counter[str]
    notices: Counter[str]
    marks: list[tuple[int, datetime]]  # (session, when) of every preemption mark
    released_marks: list[tuple[int, datetime]]
    sweeps: list[Any]  # whatever each ceiling-style sweep returned (duck-typed reports)
    states: dict[int, str]  # session -> done | running | held | paused | queued | pending | lost:<why>
    timings: dict[str, float]
    wall_seconds: float
    end: datetime
    cpu_seconds: float = 0.0  # this process's CPU: the speed on a machine nobody else is using
    preemption_events: list[CyclingEvent] = field(default_factory=list)  # the ledger, read before the store closes
    cost_caps: dict[str, Any] = field(default_factory=dict)  # `caps.cost_cap_figures`, read then too
    gate_by_window: dict[str, Counter[str]] = field(default_factory=dict)  # provider windows: holds naming each
    forecasts: dict[int, Any] = field(default_factory=dict)  # each waiting arrival's forecast (`forecasting.py`)
    forecasted: bool = False  # whether forecasts were made at all (`--forecasts`)


class Simulation:
    def __init__(
        self, scenario: Scenario, policy: str = "pacer", *, database_url: str = "sqlite://", forecasts: bool = False
    ) -> None:
        if policy not in policies.POLICIES:
            raise ValueError(error_text("simulate/policy_unknown", policy=policy, policies=policies.POLICIES))
        self.scenario, self.policy = scenario, policy
        self.engine = make_engine(database_url)  # in memory unless a test wants to read it after
        SQLModel.metadata.create_all(self.engine)
        with session_scope(self.engine) as db:
            ensure_policy(db, policies.policy_row(policy, scenario.policy))
        self.clock = VirtualClock(scenario.start)
        self.deferrer = VirtualDeferrer(self.clock)
        self.meter = build_meter(scenario)
        burns = {r.name: r.burn_usd_per_min for r in scenario.runtimes}
        spends = {r.name: r.spends_quota for r in scenario.runtimes}
        self.pool = SimWorkerPool(self.clock, self.deferrer, meter=self.meter, burns=burns, spends=spends,
                                  resume_overhead=scenario.resume_overhead, on_item_done=self._item_done)
        self._targets = job_targets()
        self.jobs: Counter[str] = Counter()
        self.timings: defaultdict[str, float] = defaultdict(float)  # wall seconds by part: jobs, arrivals, sampling
        self.notices: Counter[str] = Counter()
        self.marks: list[tuple[int, datetime]] = []
        self.released: list[tuple[int, datetime]] = []
        self.sweeps: list[Any] = []
        self.gate_by_window: dict[str, Counter[str]] = {w.name: Counter() for w in scenario.windows if w.reported_by}
        remembering = Remembering(ReusedQuotaSource(self.meter))
        self.forecasts = ForecastLog(self, remembering, enabled=forecasts)  # off: no forecast is made or scored
        self.ctx = Context(
            ports=Ports(
                engine=self.engine,
                clock=self.clock,
                deferrer=self.deferrer,
                workers=self.pool,
                quota=remembering,
            ),
            limits=Limits(
                agent_workers=scenario.policy.agent_workers,
                runtimes={r.name: Runtime(r.name, r.spends_quota, r.burn_usd_per_min) for r in scenario.runtimes},
            ),
            rng=random.Random(scenario.seed),
            job_runner=self._job,
        )
        wiring.install(self.ctx)
        self.ctx.plugins.admission_checks.extend(policies.admission_checks(policy, self.ctx, scenario.policy))
        self.ctx.plugins.listeners.append(self._notice)
        self.tracked: dict[int, Tracked] = {}
        self.sampler = Sampler(scenario, self.engine, self.pool, self.meter, self.tracked)

    # ------------------------------------------------------------------ the outside world

    def _job(self, name: str, *args: Any) -> Any:
        """Every alarm and sweep runs through here: counted, then the real target."""
        self.jobs[name] += 1
        began = time.perf_counter()
        result = self._targets[name](self.ctx, *args)
        self.timings[f"job:{name}"] += time.perf_counter() - began
        marks = getattr(result, "marks", None)
        if marks is not None:
            self.released.extend((sid, self.clock.now()) for sid in getattr(marks, "released", []))
        if hasattr(result, "resumed") or hasattr(result, "paused"):
            self.sweeps.append(result)
            self.sampler.dirty = True  # a mark settled into the queue changes counts without a notice
        return result

    def _notice(self, event: str, context: Mapping[str, Any]) -> None:
        self.notices[event] += 1
        if event == "preempt_marked":
            self.marks.append((int(context.get("session_id") or 0), self.clock.now()))
        if self.gate_by_window and event in ("held", "paused"):
            tally_gate(self.gate_by_window, event, context)
        self.sampler.dirty = True

    def _periodic(self, name: str, interval: timedelta) -> None:
        self._job(name)
        self.deferrer.schedule(f"sim-periodic:{name}", self.clock.now() + interval, self._periodic, name, interval)

    def _arrive(self, demand: Demand) -> None:
        began = time.perf_counter()
        self._create(demand)
        self.timings["arrivals"] += time.perf_counter() - began

    def _create(self, demand: Demand) -> None:
        now = self.clock.now()
        request = NewSession(
            title=demand.title, genesis=demand.genesis, scheduling_class=demand.scheduling_class,
            precedence=demand.precedence, runtime=demand.runtime, cost_cap_usd=demand.cost_cap_usd,
        )
        with session_scope(self.engine) as db:  # the intake a webhook takes: one Core INSERT
            sid = insert_session(db, request, now=now)
            core(
                db, update(SESSIONS).where(SESSIONS.c.id == sid).values(prompt=_prompt(sid, 0))
            )  # as a person's first message
            cls = class_from(request.scheduling_class, request.genesis, load_policy(db)).value
        replies = [at for at in demand.replies if at < self.scenario.end]
        track = Tracked(demand, sid, cls, now, planned=len(demand.durations), replies_due=len(replies))
        self.tracked[sid] = track
        self._submit(track, 0, "first")
        self.forecasts.arrived(sid)
        for j, at in enumerate(replies):
            self.deferrer.schedule(f"sim-reply:{sid}:{j}", at, self._reply, sid, j)

    def _submit(self, track: Tracked, turn: int, kind: str) -> None:
        prompt = _prompt(track.session_id, turn)
        self.pool.work.add(prompt, Item(track.session_id, turn, track.demand.durations[turn], self.clock.now()))
        track.submitted = turn + 1
        try:
            submit_turn(self.ctx, track.session_id, prompt, kind=kind)
        except PacerError as exc:
            track.refused.append(error_text("simulate/turn_refused", turn=turn, problem=exc))

    def _item_done(self, item: Item) -> None:
        track = self.tracked.get(item.session_id)
        if track is None or item.turn < 0 or item.turn + 1 >= track.planned:
            return
        self.deferrer.schedule(
            f"sim-follow-up:{item.session_id}",
            self.clock.now(),
            self._follow_up,
            item.session_id,
            item.turn + 1,
            FOLLOW_UP_POLL,
        )

    def _follow_up(self, sid: int, turn: int, poll: timedelta) -> None:
        """The agent (or its requester) continues once the session is idle; a session still
        busy, paused or asleep is looked at again a little later."""
        with session_scope(self.engine) as db:
            status = core(db, _STATUS, {"sid": sid}).scalar()
        if status == Status.DONE.value:
            self._submit(self.tracked[sid], turn, "follow_up")
        elif status in (Status.WAITING.value, Status.RUNNING.value, Status.NEEDS_INPUT.value):
            self.deferrer.schedule(
                f"sim-follow-up:{sid}",
                self.clock.now() + poll,
                self._follow_up,
                sid,
                turn,
                min(poll * 2, FOLLOW_UP_POLL_MAX),
            )
        else:
            self.tracked[sid].refused.append(error_text("simulate/turn_not_continued", turn=turn, status=status))

    def _reply(self, sid: int, j: int) -> None:
        track = self.tracked[sid]
        prompt = f"[sim] session {sid} reply {j}"
        self.pool.work.add(prompt, Item(sid, -1, track.demand.durations[0], self.clock.now()))
        track.replies_sent += 1
        try:
            record_human_message(self.ctx, sid, ACTOR, prompt, "console", roster=True)
        except PacerError as exc:
            track.refused.append(error_text("simulate/reply_refused", reply=j, problem=exc))

    # ------------------------------------------------------------------ the run

    def run(self, *, progress: Callable[[datetime], None] | None = None) -> Run:
        with quiet_logs():
            return self._run(progress)

    def _run(self, progress: Callable[[datetime], None] | None) -> Run:
        scenario = self.scenario
        began, cpu = time.perf_counter(), time.process_time()
        for demand in expand(scenario):
            self.deferrer.schedule(f"sim-arrival:{demand.index}", demand.at, self._arrive, demand)
        for name, interval in wiring.PERIODIC.items():
            self.deferrer.schedule(f"sim-periodic:{name}", scenario.start + interval, self._periodic, name, interval)
        t = scenario.start
        self.sampler.sample(t)
        while t < scenario.end:
            t = min(t + SAMPLE_EVERY, scenario.end)
            self.deferrer.run_until(t)
            sampled = time.perf_counter()
            self.sampler.sample(t)
            self.timings["sampling"] += time.perf_counter() - sampled
            if progress is not None and (t - scenario.start) % PROGRESS_EVERY == timedelta(0):
                progress(t)
        states = account(self.engine, self.deferrer, self.pool, self.tracked, t)
        with session_scope(self.engine) as db:
            ledger = events_since(db, scenario.start - CYCLING_WINDOW)
            caps = cost_cap_figures(db)
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
        return Run(scenario, self.policy, self.tracked, self.sampler.trace, self.pool, self.jobs, self.notices,
                   self.marks, self.released, self.sweeps, states, self.timings, wall, t, cpu, ledger, caps,
                   self.gate_by_window, self.forecasts.made, self.forecasts.enabled)

    def close(self) -> None:
        self.engine.dispose()


@contextmanager
def quiet_logs() -> Iterator[None]:
    """A week of simulated pauses and holds would be thousands of WARNING lines about sessions
    that do not exist; the report is the output. Errors still print."""
    loggers = [logging.getLogger(name) for name in ("pacer", "scheduler")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _prompt(sid: int, turn: int) -> str:
    return f"[sim] session {sid} turn {turn}"


def simulate(
    scenario: Scenario, policy: str = "pacer", *, progress: Callable[[datetime], None] | None = None,
    forecasts: bool = False,
) -> Run:
    """Run one policy over the scenario and clean up its store; `progress` hears the simulated
    time every PROGRESS_EVERY."""
    sim = Simulation(scenario, policy, forecasts=forecasts)
    try:
        return sim.run(progress=progress)
    finally:
        sim.close()
