"""The agents quota source: the windows as the provider itself reports them in the fleet's own
streams, the ledger's figures wherever the provider has not spoken.

    book = ReadingBook(engine)
    runner = CommandRunner(..., provider_sink=book.record, account="acct-1")  # any process
    source = AgentsSource(engine, ledger, book)
    reading = source.read(now)       # QuotaReading: "5h" and "7d", measured or the ledger's

The runner hands each reading to `ReadingBook.record` as the agent prints it, on whichever
process runs the turn (a `pacer worker` too); the book keeps the latest per (account, window
kind) in `provider_readings`, an upsert that never lets an older reading replace a newer one.
The deciding process reads the rows back in the transaction it reads the ledger in.

Each window (`scheduler.rules.provider_windows`): utilization and reset are the provider's
when some account's reading is current; otherwise the ledger's window stands, marked with why
(`WindowReading.fallback`: no reading yet, the readings predate the reset, or none says how full
the window is) — an estimate is never shown as a measurement. A measured window is priced by
calibration (seed 001, "Before the first calibration"): Pacer's own spend since the window began,
from the ledger, against the provider's utilization, the median over the last CALIBRATION_WINDOWS
window instances; before that it is in fraction mode.

The gate decides on the five-hour and weekly windows, and on the per-model weekly bucket that
binds the runner's own model (`--model` in its command: an Opus model is counted in
seven_day_opus, shown as "7d_opus"), which the provider may spend out before the all-models
week. Another model's bucket holds nothing here: its work is not this runner's. A bucket has no
ledger equivalent, so it is decided on only while an agent's reading of it is current. A runner
that leaves the model to the agent is decided on the five-hour and weekly windows alone.

The source asks its ledger and its book only what `Estimates` and `Readings` name, so the
simulator (`bot/simulate/provider.py`) runs this same source over its in-memory meter.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import Engine, select
from sqlalchemy.dialects import postgresql, sqlite

from scheduler.ports import ProviderReading, QuotaReading, WindowReading
from scheduler.rules.calibration import Observation, calibrate, priced
from scheduler.rules.provider_windows import Fallback, Measured, is_current, measure
from scheduler.store.models import ProviderWindowReading

READINGS = ProviderWindowReading.__table__  # type: ignore[attr-defined]
KINDS = {"5h": "five_hour", "7d": "seven_day"}  # the gate's windows, by the provider's names
MODEL_FAMILIES = ("opus", "sonnet")  # the per-model weekly buckets Claude Code reports
WEEK = timedelta(days=7)
CALIBRATION_WINDOWS = 12  # window instances whose last observation calibration remembers


def model_buckets(model: str | None) -> list[tuple[str, str]]:
    """(window name, provider kind) of the per-model weekly buckets that count `model`'s use."""
    lowered = (model or "").lower()
    return [(f"7d_{family}", f"seven_day_{family}") for family in MODEL_FAMILIES if family in lowered]


class Estimates(Protocol):
    """What the source asks of the ledger: its windows, and Pacer's own spend since each start."""

    def read_in(self, db: Any, now: datetime) -> QuotaReading: ...

    def spend(self, db: Any, starts: Sequence[datetime], now: datetime) -> list[float]: ...


class Readings(Protocol):
    """What the source asks of the book: the latest reading of each (account, window kind)."""

    def latest_in(self, db: Any) -> list[ProviderReading]: ...


class ReadingBook:
    """The latest reading of each (account, window kind), in the database every process shares."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def record(self, reading: ProviderReading) -> None:
        """Keep `reading` unless a later one of the same window and account is already kept."""
        values = {
            "account": reading.account, "kind": reading.kind, "provider": reading.provider, "status": reading.status,
            "utilization": reading.utilization, "resets_at": reading.resets_at,
            "is_using_overage": reading.is_using_overage, "overage_status": reading.overage_status,
            "observed_at": reading.observed_at,
        }
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        insert = dialect.insert(READINGS).values(**values)
        newer = {key: insert.excluded[key] for key in values if key not in ("account", "kind")}
        statement = insert.on_conflict_do_update(
            index_elements=["account", "kind"], set_=newer, where=READINGS.c.observed_at <= insert.excluded.observed_at,
        )
        with self.engine.begin() as conn:
            conn.execute(statement)

    def latest_in(self, db: Any) -> list[ProviderReading]:
        """Every kept reading, inside the caller's connection or session."""
        rows = db.execute(select(READINGS)).mappings().all()
        return [
            ProviderReading(
                provider=row["provider"], kind=row["kind"], observed_at=row["observed_at"], status=row["status"],
                utilization=row["utilization"], resets_at=row["resets_at"], is_using_overage=row["is_using_overage"],
                overage_status=row["overage_status"], account=row["account"],
            )
            for row in rows
        ]

    def latest(self) -> list[ProviderReading]:
        with self.engine.connect() as conn:
            return self.latest_in(conn)


class AgentsSource:
    """QuotaSource over the provider's readings, falling back to `ledger` window by window."""

    def __init__(
        self, engine: Engine, ledger: Estimates, book: Readings | None = None, *, model: str | None = None
    ) -> None:
        self.engine = engine
        self.ledger = ledger
        self.book: Readings = book or ReadingBook(engine)
        self.buckets = model_buckets(model)
        # window name -> {that window instance's reset: its latest observation}
        self._observations: dict[str, dict[datetime, Observation]] = {}
        self._order: dict[str, deque[datetime]] = {}

    def read(self, now: datetime) -> QuotaReading:
        with self.engine.connect() as conn:
            return self.read_in(conn, now)

    def read_in(self, db: Any, now: datetime) -> QuotaReading:
        estimate = self.ledger.read_in(db, now)
        readings = self.book.latest_in(db)
        windows = [self._window(db, w, readings, now) for w in estimate.windows]
        for name, kind in self.buckets:
            measured = measure(readings, kind, WEEK, now)
            if isinstance(measured, Measured):
                windows.append(self._measured(db, name, WEEK, measured, now))
        return QuotaReading(windows=windows, read_at=now)

    def _window(
        self, db: Any, estimate: WindowReading, readings: list[ProviderReading], now: datetime
    ) -> WindowReading:
        kind = KINDS.get(estimate.name)
        period = timedelta(seconds=estimate.period_seconds)
        measured = measure(readings, kind, period, now) if kind is not None else Fallback.NO_READING
        if isinstance(measured, Fallback):
            # An `allowed` event often names no utilization, yet says overage is being spent: that stands.
            overage = any(r.is_using_overage for r in readings if r.kind == kind and is_current(r, period, now))
            return replace(estimate, fallback=measured.value, using_overage=overage)
        return self._measured(db, estimate.name, period, measured, now)

    def _measured(self, db: Any, name: str, period: timedelta, measured: Measured, now: datetime) -> WindowReading:
        window = WindowReading(
            name, period.total_seconds(), measured.utilization, measured.resets_at, None, measured_by=measured.provider,
            warned=measured.warned, using_overage=measured.using_overage, accounts=measured.accounts,
            buckets=measured.buckets,
        )
        start = measured.resets_at - period
        if start < now:
            (spent,) = self.ledger.spend(db, [start], now)
            self._observe(name, measured.resets_at, Observation(spent, measured.utilization))
        return priced(window, calibrate(self._observations.get(name, {}).values()))

    def _observe(self, name: str, instance: datetime, observation: Observation) -> None:
        """Keep the latest observation of each window instance, for the last CALIBRATION_WINDOWS."""
        kept, order = self._observations.setdefault(name, {}), self._order.setdefault(name, deque())
        if instance not in kept:
            order.append(instance)
            if len(order) > CALIBRATION_WINDOWS:
                kept.pop(order.popleft(), None)
        kept[instance] = observation


__all__ = ["KINDS", "AgentsSource", "Estimates", "ReadingBook", "Readings", "model_buckets"]
