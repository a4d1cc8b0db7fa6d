"""The ledger quota source, the embedded default: windows priced from Pacer's own recorded turn
costs against configured window budgets, on a fixed reset schedule.

    source = LedgerSource(engine, capacity_5h_usd=50, capacity_7d_usd=600, anchor=anchor,
                          fallbacks={"echo": 1.5})
    reading = source.read(now)                    # QuotaReading with "5h" and "7d" windows
    reading = source.read_in(db, now)             # the same, inside the caller's transaction
    source.spent_since(start, now)                # dollars since `start`, running turns included

The schedule (`scheduler/rules/windows.py`): window k of a period P resets at anchor + k*P, for every integer k, so the
current window is the one whose span [anchor + k*P, anchor + (k+1)*P) holds `now`.

A ledger is calibrated by definition: its capacity is the configured dollar figure, so both
windows carry capacity_usd and spent_usd. Spent is the cost of turns that finished inside the
window plus what running turns have accrued inside it (elapsed minutes x their runtime's burn
rate), because a turn records its cost only when it ends and an hour-long turn would otherwise
be invisible to the gate for its whole hour. When it ends, its reported cost replaces the
accrual. A finished turn that began before the window started is split at the window's start,
pro rata by time: only the part it ran inside the window is the window's. Booking it whole in
the window it finished in would charge a new window for what the last one spent, and hold its
spot work for money the provider never counted against it.

Reads are an aggregate query, one over running turns (bounded by the worker pool) and one
primary-key lookup of the turns that straddle a window's start (`Straddlers`), so a history of
100,000 turns costs the same handful of rows. A database error propagates: the
caller, not the ledger, decides that the gate is unavailable.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, and_, case, func, literal, or_, select

from integrations.quota.history import MODEL, TURNS, load_burn_table
from scheduler.ports import QuotaReading, WindowReading
from scheduler.rules.windows import share_before, window_bounds

WINDOWS: tuple[tuple[str, timedelta], ...] = (("5h", timedelta(hours=5)), ("7d", timedelta(days=7)))


def finished_spend(db: Any, starts: Sequence[datetime], now: datetime) -> list[float]:
    """Cost of turns that finished in [start, now], for each start, in one query on the
    (finished_at, cost_usd) index. Whole costs: `Straddlers` takes back what fell before a start."""
    if not starts:
        return []
    finished = TURNS.c.finished_at
    sums = [
        func.coalesce(func.sum(case((finished >= start, TURNS.c.cost_usd), else_=0.0)), 0.0)
        for start in starts
    ]
    row = db.execute(select(*sums).where(finished >= min(starts), finished <= now)).one()
    return [float(value) for value in row]


def running_turns(db: Any) -> list[Any]:
    """(id, runtime, started_at, model or None) of every turn a worker is executing now."""
    model = MODEL if MODEL is not None else literal(None)
    return list(
        db.execute(
            select(TURNS.c.id, TURNS.c.runtime, TURNS.c.started_at, model).where(
                TURNS.c.status == "running",
                TURNS.c.started_at.is_not(None),
                TURNS.c.finished_at.is_(None),
            )
        ).all()
    )


def accrual(
    db: Any, running: Sequence[Any], starts: Sequence[datetime], now: datetime, fallbacks: Mapping[str, float]
) -> list[float]:
    """What the `running` turns have burned since each start, at their runtime's rate."""
    totals = [0.0 for _ in starts]
    if not running:
        return totals
    table = load_burn_table(db, fallbacks)
    for _id, runtime, started_at, model in running:
        rate = table.rate(runtime, model)
        for i, start in enumerate(starts):
            since = max(started_at, start)
            if since < now:
                totals[i] += rate * (now - since).total_seconds() / 60.0
    return totals


def running_accrual(db: Any, starts: Sequence[datetime], now: datetime, fallbacks: Mapping[str, float]) -> list[float]:
    """What turns still running have burned since each start, at their runtime's rate."""
    return accrual(db, running_turns(db), starts, now, fallbacks)


@dataclass
class _Window:
    pending: set[int] = field(default_factory=set)  # began before the start, not seen finished yet
    settled: dict[int, tuple[datetime, float]] = field(default_factory=dict)  # id -> (finished, dollars before)


class Straddlers:
    """The turns that straddle each window's start, and what they spent before it.

    Only a turn running at a window's start straddles it. The first read of a window finds the
    ones that have already finished (one scan of the turns finished since the start — the only
    read here that is not on an index alone); from then on every read already has the running
    turns in hand, so one that began before the start is noted there, and looked up by id once,
    when it has finished. The steady cost is nothing at all, not a scan of a week of turns."""

    KEEP = 8  # window starts remembered, the least recently read forgotten first

    def __init__(self) -> None:
        self._windows: OrderedDict[datetime, _Window] = OrderedDict()
        self._lock = threading.Lock()

    def spent_before(self, db: Any, starts: Sequence[datetime], now: datetime, running: Sequence[Any]) -> list[float]:
        """For each start: what turns that finished in [start, now] had spent before it."""
        with self._lock:
            unknown = [start for start in starts if start not in self._windows]
        found = self._scan(db, unknown, now) if unknown else {}
        running_ids = {int(row[0]) for row in running}
        with self._lock:
            for start in starts:
                window = self._windows.setdefault(start, _Window())
                window.settled.update(found.get(start, {}))
                window.pending |= {int(row[0]) for row in running if row[2] < start} - window.settled.keys()
                self._windows.move_to_end(start)
            while len(self._windows) > self.KEEP:
                self._windows.popitem(last=False)
            windows = [(start, self._windows[start]) for start in starts]
            ended = set().union(*(w.pending for _, w in windows)) - running_ids
        if ended:
            rows = db.execute(
                select(TURNS.c.id, TURNS.c.started_at, TURNS.c.finished_at, TURNS.c.cost_usd).where(
                    TURNS.c.id.in_(sorted(ended)), TURNS.c.finished_at.is_not(None)
                )
            ).all()
            with self._lock:
                for turn_id, started_at, finished_at, cost in rows:
                    for start, window in windows:
                        if int(turn_id) in window.pending:
                            window.pending.discard(int(turn_id))
                            before = float(cost or 0.0) * share_before(started_at, finished_at, start)
                            window.settled[int(turn_id)] = (finished_at, before)
        with self._lock:
            return [
                sum(before for finished_at, before in window.settled.values() if start <= finished_at <= now)
                for start, window in windows
            ]

    @staticmethod
    def _scan(db: Any, starts: Sequence[datetime], now: datetime) -> dict[datetime, dict[int, tuple[datetime, float]]]:
        began, finished = TURNS.c.started_at, TURNS.c.finished_at
        rows = db.execute(
            select(TURNS.c.id, began, finished, TURNS.c.cost_usd).where(
                finished <= now, or_(*[and_(finished >= start, began < start) for start in starts])
            )
        ).all()
        found: dict[datetime, dict[int, tuple[datetime, float]]] = {start: {} for start in starts}
        for turn_id, started_at, finished_at, cost in rows:
            for start in starts:
                if started_at < start <= finished_at:
                    found[start][int(turn_id)] = (
                        finished_at,
                        float(cost or 0.0) * share_before(started_at, finished_at, start),
                    )
        return found


class LedgerSource:
    """QuotaSource over Pacer's own turn costs."""

    def __init__(
        self,
        engine: Engine,
        *,
        capacity_5h_usd: float,
        capacity_7d_usd: float,
        anchor: datetime,
        fallbacks: Mapping[str, float] | None = None,
    ) -> None:
        for name, value in (("capacity_5h_usd", capacity_5h_usd), ("capacity_7d_usd", capacity_7d_usd)):
            if not value > 0:
                raise ValueError(f"{name} must be above 0 (got {value!r})")
        if anchor.tzinfo is None:
            raise ValueError("anchor must be timezone-aware")
        self.engine = engine
        self.capacities = {"5h": float(capacity_5h_usd), "7d": float(capacity_7d_usd)}
        self.anchor = anchor
        self.fallbacks = dict(fallbacks or {})
        self.straddlers = Straddlers()

    def spend(self, db: Any, starts: Sequence[datetime], now: datetime) -> list[float]:
        """Dollars spent inside [start, now] for each start: finished turns (less what a turn that
        straddles the start spent before it) plus what running turns have accrued since."""
        running = running_turns(db)
        finished = finished_spend(db, starts, now)
        before = self.straddlers.spent_before(db, starts, now, running)
        accrued = accrual(db, running, starts, now, self.fallbacks)
        return [f - b + a for f, b, a in zip(finished, before, accrued)]

    def spent_since(self, start: datetime, now: datetime) -> float:
        """Dollars Pacer spent from `start` to `now` (calibrates the pool against the ledger)."""
        with self.engine.connect() as conn:
            return self.spend(conn, [start], now)[0]

    def read(self, now: datetime) -> QuotaReading:
        with self.engine.connect() as conn:
            return self.read_in(conn, now)

    def read_in(self, db: Any, now: datetime) -> QuotaReading:
        """The same reading inside a caller's open session or connection. A snapshot built in
        one transaction should use this: on SQLite a second connection would wait on the
        first's write lock."""
        bounds = [(name, period, *window_bounds(self.anchor, period, now)) for name, period in WINDOWS]
        spent = self.spend(db, [start for _, _, start, _ in bounds], now)
        windows = [
            WindowReading(
                name=name,
                period_seconds=period.total_seconds(),
                utilization=dollars / self.capacities[name],
                resets_at=resets_at,
                capacity_usd=self.capacities[name],
                spent_usd=dollars,
            )
            for (name, period, _, resets_at), dollars in zip(bounds, spent)
        ]
        return QuotaReading(windows=windows, read_at=now)


__all__ = [
    "WINDOWS",
    "LedgerSource",
    "Straddlers",
    "accrual",
    "finished_spend",
    "running_accrual",
    "running_turns",
]
