"""`--from-db`: the arrivals recorded in Pacer's own database as a scenario, for "what would
last week have looked like with a 30% reserve?".

Each recorded session becomes one arrival at its created_at with its genesis, its class as the
deployment resolves it today, its precedence and runtime. Its work is its turns' durations: a
turn halted by a pause and the resume that finished it are one piece of work, and the turns
people started by replying are replayed as replies at the same offsets (each the length of the
session's first turn, the simulator's convention). The windows, runtimes and policy come from
the scenario file given with it, else from the deployment's settings and its policy row, so
`--policy` and an edited scenario are the what-if.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import inspect
from sqlalchemy.exc import OperationalError
from sqlmodel import col, select

from bot.config.settings import redact_url
from bot.runtime.adapters import runtimes_from_settings
from bot.simulate.scenario import (
    ArrivalSpec,
    PolicySpec,
    RuntimeSpec,
    Scenario,
    ScenarioError,
    WindowSpec,
    parse_instant,
)
from integrations.quota.history import load_burn_table
from scheduler.front import (
    HumanMessage,
    Session,
    Turn,
    class_of,
    load_policy,
    make_engine,
    session_scope,
    window_bounds,
)
from templates import error_text

DEFAULT_TURN = timedelta(minutes=30)
TAIL = timedelta(days=1)  # simulated past the last arrival, so the backlog can drain
CONTINUATIONS = ("resume", "recovery", "nudge")


def work_of(turns: list[Turn]) -> list[timedelta]:
    """The durations of a session's work, in order: a halted turn is merged into the turn that
    carried it on, and the turns people started by replying are left to the replies."""
    durations: list[timedelta] = []
    carried = timedelta(0)
    for turn in turns:
        if turn.kind == "human":
            continue
        took = _took(turn)
        if turn.status == "halted":
            carried += took
            continue
        if turn.kind in CONTINUATIONS and durations and not carried:
            durations[-1] += took  # a nudge after a finished turn continues that work
            continue
        durations.append(carried + took)
        carried = timedelta(0)
    if carried:
        durations.append(carried)
    return [d for d in durations if d > timedelta(0)]


def _took(turn: Turn) -> timedelta:
    if turn.duration_ms:
        return timedelta(milliseconds=turn.duration_ms)
    if turn.started_at and turn.finished_at:
        return turn.finished_at - turn.started_at
    return timedelta(0)


def is_missing_file(url: str) -> bool:
    """Whether `url` names a SQLite file that does not exist."""
    if not url.startswith("sqlite") or url in ("sqlite://", "sqlite:///:memory:"):
        return False
    return not Path(url.split("///", 1)[-1]).exists()


def scenario_from_db(
    settings: Any, base: Scenario | None, *, since: str | None = None, tail: timedelta = TAIL
) -> Scenario:
    url = settings.database_url
    if is_missing_file(url):  # opening it would make an empty database (and ./var/) where there was none
        raise ScenarioError(error_text("simulate/no_database", url=url))
    engine = make_engine(url)
    try:
        with engine.connect() as conn:  # reachable and Pacer's, asked before a transaction whose hooks would warn first
            if not inspect(conn).has_table("sessions"):
                raise ScenarioError(error_text("simulate/not_pacer_database", url=redact_url(url)))
        with session_scope(engine) as db:
            policy = load_policy(db)
            stmt = (
                select(Session)
                .where(col(Session.bookkeeping).is_(False))
                .order_by(col(Session.created_at), col(Session.id))
            )
            if since:
                stmt = stmt.where(col(Session.created_at) >= parse_instant("--since", since, None))
            sessions = list(db.exec(stmt))
            ids = [s.id for s in sessions]
            turns: dict[int, list[Turn]] = defaultdict(list)
            replies: dict[int, list[datetime]] = defaultdict(list)
            if ids:
                for t in db.exec(select(Turn).where(col(Turn.session_id).in_(ids)).order_by(col(Turn.id))):
                    turns[t.session_id].append(t)
                for m in db.exec(select(HumanMessage).where(col(HumanMessage.session_id).in_(ids))):
                    replies[m.session_id].append(m.created_at)
            classes = {s.id: class_of(s, policy).value for s in sessions}
            burns = _burns(db, settings)
            policy_spec = PolicySpec(policy.gating_enabled, policy.reserve_5h_pct, policy.reserve_7d_pct,
                                     policy.max_sessions, settings.agent_workers, policy.preemption_enabled)
    except OperationalError as exc:  # unreachable or refused: one line, not the driver's traceback
        reason = (str(exc.orig or exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ScenarioError(error_text("simulate/database_unreadable", url=redact_url(url), reason=reason)) from None
    finally:
        engine.dispose()
    if not sessions:
        raise ScenarioError(error_text("simulate/nothing_recorded", since=since))
    known = [d for s in sessions for d in work_of(turns[s.id or 0])]
    typical = sorted(known)[len(known) // 2] if known else DEFAULT_TURN
    start = sessions[0].created_at.replace(second=0, microsecond=0)
    end = sessions[-1].created_at + tail
    runtimes = list(base.runtimes) if base else [
        RuntimeSpec(name, rate, spends) for name, (rate, spends) in sorted(burns.items())
    ]
    names = {r.name for r in runtimes}
    for s in sessions:
        if s.runtime not in names:
            rate, spends = burns.get(s.runtime, (0.0, True))
            runtimes.append(RuntimeSpec(s.runtime, rate, spends))
            names.add(s.runtime)
    arrivals = tuple(
        ArrivalSpec(
            at=s.created_at, genesis=s.genesis, scheduling_class=classes[s.id], precedence=s.precedence,
            runtime=s.runtime, durations=tuple(work_of(turns[s.id or 0]) or [typical]),
            replies=tuple(at - s.created_at for at in sorted(replies[s.id or 0]) if at >= s.created_at),
            title=s.title or f"#{s.id}",
        )
        for s in sessions
    )
    windows = base.windows if base else _windows(settings, start)
    return Scenario(
        name=error_text("simulate/replay_name", count=len(sessions)), start=start, duration=end - start,
        seed=base.seed if base else 1, policy=base.policy if base else policy_spec, windows=windows,
        runtimes=tuple(runtimes), arrivals=arrivals, accounts=base.accounts if base else (),
    )


def _burns(db: Any, settings: Any) -> dict[str, tuple[float, bool]]:
    """Each runtime's measured burn (the same table the gate reads), its configured rate when
    nothing is measured, and whether it spends quota."""
    configured = runtimes_from_settings(settings)
    table = load_burn_table(db, {name: r.default_burn_per_min for name, r in configured.items()})
    seen = {row[0] for row in db.exec(select(Turn.runtime).distinct())} | set(configured)
    out = {}
    for name in seen:
        runtime = configured.get(name)
        out[name] = (table.rate(name), runtime.spends_quota if runtime else True)
    return out


def _windows(settings: Any, start: datetime) -> tuple[WindowSpec, ...]:
    anchor = datetime.fromisoformat(settings.window_anchor)
    out = []
    for name, period, budget in (
        ("5h", timedelta(hours=5), settings.window_5h_usd),
        ("7d", timedelta(days=7), settings.window_7d_usd),
    ):
        out.append(WindowSpec(name, period, float(budget), window_bounds(anchor, period, start)[1]))
    return tuple(out)
