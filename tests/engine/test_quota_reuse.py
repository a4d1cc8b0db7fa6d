"""The caching adapter around a quota source: a reading is reused for its TTL (and whenever it was
read at a later instant than the one asked for), read again after it, never kept when the read
failed, and read every time at TTL 0."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.context import Context, Ports
from scheduler.engine.fleet import read_quota
from scheduler.ports import QuotaReading
from scheduler.quota_reuse import ReusedQuotaSource

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


class Counting:
    def __init__(self) -> None:
        self.reads: list[datetime] = []
        self.fail = False

    def read(self, now: datetime) -> QuotaReading | None:
        if self.fail:
            raise OSError("the ledger is gone")
        self.reads.append(now)
        return QuotaReading(windows=(), read_at=now)


@pytest.mark.parametrize(("later", "reads_again"), [
    (timedelta(0), False), (timedelta(seconds=4.9), False), (timedelta(seconds=5), True),
    (timedelta(seconds=-1), False),
    (timedelta(hours=-1), False),
])
def test_a_reading_is_reused_for_its_ttl(later: timedelta, reads_again: bool) -> None:
    source = Counting()
    reused = ReusedQuotaSource(source, ttl_seconds=5)
    first = reused.read(T0)
    second = reused.read(T0 + later)
    assert len(source.reads) == (2 if reads_again else 1)
    assert (second is first) is not reads_again


def test_ttl_zero_reads_every_time() -> None:
    source = Counting()
    reused = ReusedQuotaSource(source, ttl_seconds=0)
    reused.read(T0)
    reused.read(T0)
    assert source.reads == [T0, T0]


def test_a_failed_read_is_not_kept_and_the_gate_falls_open() -> None:
    source = Counting()
    reused = ReusedQuotaSource(source, ttl_seconds=5)

    ctx = Context(ports=Ports(engine=None, clock=None, deferrer=None, workers=None, quota=reused))  # type: ignore[arg-type]
    source.fail = True
    assert read_quota(ctx, T0) is None
    source.fail = False
    assert read_quota(ctx, T0 + timedelta(seconds=1)) is not None
    assert source.reads == [T0 + timedelta(seconds=1)]


def test_asking_again_inside_a_transaction_never_waits_on_its_own_sqlite_lock(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The engine reads the quota before its transaction and an admission check asks again, at
    the same instant, from inside it. Meanwhile another thread has read at a later instant. A
    database-backed source read again there would open a second connection, and on SQLite wait
    on the transaction's own write lock for the busy timeout (30 s): the later reading is used."""
    from concurrent.futures import ThreadPoolExecutor

    from sqlmodel import SQLModel

    import scheduler.store.models  # noqa: F401
    from integrations.quota import AgentsSource, LedgerSource
    from scheduler.store import db as dbmod

    engine = dbmod.make_engine(f"sqlite:///{tmp_path}/pacer.db")
    SQLModel.metadata.create_all(engine)
    ledger = LedgerSource(engine, capacity_5h_usd=50, capacity_7d_usd=600, anchor=datetime(2026, 1, 5, tzinfo=UTC))
    reused = ReusedQuotaSource(AgentsSource(engine, ledger), ttl_seconds=0.5)
    ctx = Context(ports=Ports(engine=engine, clock=None, deferrer=None, workers=None, quota=reused))  # type: ignore[arg-type]
    assert read_quota(ctx, T0) is not None  # the decision's own read, before its transaction
    with ThreadPoolExecutor(1) as other:
        assert other.submit(read_quota, ctx, T0 + timedelta(seconds=2)).result() is not None  # another thread, later

    def decide() -> object:
        with dbmod.session_scope(engine) as db:
            db.connection()  # the transaction has begun: on SQLite it holds the write lock
            return read_quota(ctx, T0)  # an admission check asks again, at the decision's instant

    with ThreadPoolExecutor(1) as deciding:
        assert deciding.submit(decide).result(timeout=5) is not None
    engine.dispose()
