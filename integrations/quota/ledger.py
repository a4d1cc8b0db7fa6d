"""The ledger quota source, the embedded default: windows priced from Pacer's own recorded turn
costs against configured window budgets, on a fixed reset schedule.

    source = LedgerSource(engine, capacity_5h_usd=50, capacity_7d_usd=600, anchor=anchor,
                          fallbacks={"echo": 1.5})
    reading = source.read(now)                    # QuotaReading with "5h" and "7d" windows
    reading = source.read_in(db, now)             # the same, inside the caller's transaction
    source.spent_since(start, now)                # dollars since `start`, running turns included

The schedule: window k of a period P resets at anchor + k*P, for every integer k, so the
current window is the one whose span [anchor + k*P, anchor + (k+1)*P) holds `now`.

A ledger is calibrated by definition: its capacity is the configured dollar figure, so both
windows carry capacity_usd and spent_usd. Spent is the cost of turns that finished inside the
window plus what running turns have accrued inside it (elapsed minutes x their runtime's burn
rate), because a turn records its cost only when it ends and an hour-long turn would otherwise
be invisible to the gate for its whole hour. When it ends, its reported cost replaces the
accrual.

Reads are two aggregate queries and one over running turns (bounded by the worker pool), so
a history of 100,000 turns costs the same handful of rows. A database error propagates: the
caller, not the ledger, decides that the gate is unavailable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, case, func, select

from integrations.quota.history import MODEL, TURNS, load_burn_table
from scheduler.ports import QuotaReading, WindowReading

WINDOWS: tuple[tuple[str, timedelta], ...] = (("5h", timedelta(hours=5)), ("7d", timedelta(days=7)))


def window_bounds(anchor: datetime, period: timedelta, now: datetime) -> tuple[datetime, datetime]:
    """(start, resets_at) of the scheduled window holding `now`; works before the anchor too."""
    if period <= timedelta(0):
        raise ValueError(f"period must be positive (got {period!r})")
    k = (now - anchor) // period
    start = anchor + k * period
    return start, start + period


def finished_spend(db: Any, starts: Sequence[datetime], now: datetime) -> list[float]:
    """Cost of turns that finished in [start, now], for each start, in one query."""
    if not starts:
        return []
    finished = TURNS.c.finished_at
    sums = [
        func.coalesce(func.sum(case((finished >= start, TURNS.c.cost_usd), else_=0.0)), 0.0)
        for start in starts
    ]
    row = db.execute(select(*sums).where(finished >= min(starts), finished <= now)).one()
    return [float(value) for value in row]


def running_accrual(db: Any, starts: Sequence[datetime], now: datetime, fallbacks: Mapping[str, float]) -> list[float]:
    """What turns still running have burned since each start, at their runtime's rate."""
    columns = [TURNS.c.runtime, TURNS.c.started_at] + ([MODEL] if MODEL is not None else [])
    running = db.execute(
        select(*columns).where(
            TURNS.c.status == "running",
            TURNS.c.started_at.is_not(None),
            TURNS.c.finished_at.is_(None),
        )
    ).all()
    if not running:
        return [0.0 for _ in starts]
    table = load_burn_table(db, fallbacks)
    totals = [0.0 for _ in starts]
    for row in running:
        rate = table.rate(row[0], row[2] if MODEL is not None else None)
        for i, start in enumerate(starts):
            since = max(row[1], start)
            if since < now:
                totals[i] += rate * (now - since).total_seconds() / 60.0
    return totals


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

    def spend(self, db: Any, starts: Sequence[datetime], now: datetime) -> list[float]:
        finished = finished_spend(db, starts, now)
        accrued = running_accrual(db, starts, now, self.fallbacks)
        return [f + a for f, a in zip(finished, accrued)]

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


__all__ = ["WINDOWS", "LedgerSource", "finished_spend", "running_accrual", "window_bounds"]
