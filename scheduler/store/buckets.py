"""Hourly budgets shared by every process on the database: a bucket of calls per name, refilled
at a steady rate, taken from in one transaction, so N processes together stay inside one bound
(GitHub's secondary rate limits count a token's writes, not a process's).

    wait = take(engine, "github-progress", per_hour=150, burst=30, now=time.time())
    # 0.0: a call was taken now; else the seconds until the bucket has one (nothing taken)

Times are wall-clock seconds since the epoch: the processes share no monotonic clock.
"""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, SQLModel, select

from scheduler.store.db import session_scope


class SpacingBucket(SQLModel, table=True):
    __tablename__ = "spacing_buckets"

    name: str = Field(primary_key=True, max_length=64)
    tokens: float
    filled_at: float


def take(engine: Engine, name: str, *, per_hour: float, burst: int, now: float) -> float:
    """Take one call from `name`'s bucket (made full on first use), or say how long until one."""
    try:
        return _take(engine, name, per_hour / 3600.0, float(max(burst, 1)), now)
    except IntegrityError:  # another process made the bucket first: take from theirs
        return _take(engine, name, per_hour / 3600.0, float(max(burst, 1)), now)


def _take(engine: Engine, name: str, rate: float, full: float, now: float) -> float:
    with session_scope(engine) as db:
        row = db.exec(select(SpacingBucket).where(SpacingBucket.name == name).with_for_update()).first()
        if row is None:
            # Two first takes at once: the primary key lets one in, the other takes again (`take`).
            db.add(SpacingBucket(name=name, tokens=full - 1, filled_at=now))
            return 0.0
        tokens = min(full, row.tokens + max(now - row.filled_at, 0.0) * rate)
        row.filled_at = max(now, row.filled_at)
        if tokens >= 1:
            row.tokens = tokens - 1
            return 0.0
        row.tokens = tokens
        return (1 - tokens) / rate
