"""The start-time forecasts (issue 32, P20 item 2), kept where every process's views read them:
one row per waiting session, replaced whole by each refresh (`scheduler.steering.forecasting`);
and the history a forecast draws from, read once an hour per engine (as the demand-aware pace
reads its own): each runtime's recent turn lengths, the share of its turns a follow-up came
after, and the priority sessions created per hour of week.

A row is an estimate made at `computed_at`, never a promise: the median of the runs forward, and
their range (`high` None: in some runs it had not started within the forecast's horizon).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, insert
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.rules.demand import HISTORY, hour_of_week
from scheduler.rules.forecast import PRIORITY_KIND, kind_of
from scheduler.rules.genesis import SchedulingClass
from scheduler.rules.snapshot import PolicyView
from scheduler.store.caches import kept_for
from scheduler.store.db import core
from scheduler.store.forecast_table import SessionForecast
from scheduler.store.models import Session, Turn
from scheduler.store.sessions import class_expr

RECENT_TURNS = 200  # a runtime's turn lengths are drawn from its latest finished turns
_HISTORY_KEY = "forecast.history"


def replace_all(db: DBSession, rows: Iterable[Mapping[str, object]]) -> int:
    """The refresh's forecasts replace every kept one (a session no longer waiting loses its row)."""
    found = list(rows)
    db.execute(delete(SessionForecast))
    if found:
        db.execute(insert(SessionForecast), found)
    return len(found)


def forecast_of(db: DBSession, session_id: int) -> SessionForecast | None:
    return db.get(SessionForecast, session_id)


def forecasts_of(db: DBSession, session_ids: Iterable[int]) -> dict[int, SessionForecast]:
    ids = list(session_ids)
    if not ids:
        return {}
    return {f.session_id: f for f in db.exec(select(SessionForecast).where(col(SessionForecast.session_id).in_(ids)))}


@dataclass(frozen=True)
class History:
    turn_minutes: dict[str, tuple[float, ...]]  # runtime, and `kind_of` -> the latest finished turns' lengths
    follow_up: dict[str, float]  # runtime, and `kind_of` -> the share of those turns a follow-up came after
    priority_counts: Counter[tuple[str, int]]  # ("priority", hour of week) -> sessions created
    priority_runtimes: Counter[str]  # what those sessions ran on
    first: datetime | None  # the earliest session created in the history


def history(db: DBSession, policy: PolicyView, until: datetime) -> History:
    """The history up to `until` (an hour's start), read once per hour per engine."""
    return kept_for(db, _HISTORY_KEY, until, lambda: _learn(db, policy, until))


def _learn(db: DBSession, policy: PolicyView, until: datetime) -> History:
    since = until - HISTORY
    resolved = class_expr(policy)
    lengths: dict[str, list[float]] = {}
    finished = (col(Turn.finished_at) >= since, col(Turn.finished_at) < until)
    for genesis, cls, runtime, ms in core(db, sa_select(
            col(Session.genesis), resolved, col(Turn.runtime), col(Turn.duration_ms)
    ).join(Session, col(Session.id) == col(Turn.session_id)).where(col(Turn.duration_ms).is_not(None), *finished)
            .order_by(col(Turn.finished_at).desc()).limit(RECENT_TURNS * 20)):
        for key in _keys(str(genesis), str(cls), str(runtime)):
            got = lengths.setdefault(key, [])
            if len(got) < RECENT_TURNS and ms > 0:
                got.append(float(ms) / 60_000.0)
    turns: Counter[str] = Counter()
    sessions: Counter[str] = Counter()
    for genesis, cls, runtime, n, distinct in core(db, sa_select(
            col(Session.genesis), resolved, col(Turn.runtime), func.count(), func.count(func.distinct(col(Session.id)))
    ).join(Session, col(Session.id) == col(Turn.session_id)).where(*finished)
            .group_by(col(Session.genesis), resolved, col(Turn.runtime))):
        for key in _keys(str(genesis), str(cls), str(runtime)):
            turns[key] += int(n)
            sessions[key] += int(distinct)
    follow_up = {key: max(1.0 - sessions[key] / n, 0.0) for key, n in turns.items() if n}
    counts: Counter[tuple[str, int]] = Counter()
    runtimes: Counter[str] = Counter()
    first: datetime | None = None
    for cls, runtime, at in core(db, sa_select(resolved, col(Session.runtime), col(Session.created_at))
                                 .where(col(Session.created_at) >= since, col(Session.created_at) < until,
                                        col(Session.bookkeeping).is_(False))):
        first = at if first is None or at < first else first
        if cls == SchedulingClass.PRIORITY.value:
            counts["priority", hour_of_week(at)] += 1
            runtimes[str(runtime)] += 1
    return History({rt: tuple(v) for rt, v in lengths.items()}, follow_up, counts, runtimes, first)


def _keys(genesis: str, cls: str, runtime: str) -> tuple[str, ...]:
    """Where one finished turn counts: its runtime, its genesis on it, and the priority sessions on it."""
    keys = (runtime, kind_of(genesis, runtime))
    return (*keys, kind_of(PRIORITY_KIND, runtime)) if cls == SchedulingClass.PRIORITY.value else keys
