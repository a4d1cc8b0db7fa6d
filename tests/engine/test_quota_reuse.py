"""The caching adapter around a quota source: a reading is reused for its TTL, read again after
it (or when the clock goes back), never kept when the read failed, and read every time at TTL 0."""

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
    (timedelta(0), False), (timedelta(seconds=4.9), False), (timedelta(seconds=5), True), (timedelta(seconds=-1), True),
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
