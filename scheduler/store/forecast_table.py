"""The table of start-time forecasts: one row per waiting session (`scheduler.store.forecast_rows`
reads and writes it). A module of its own so `models` can register it without importing the reads.

A row is an estimate made at `computed_at`, never a promise: the median of the runs forward, and
their range (`high` None: in some runs it had not started within the forecast's horizon).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column
from sqlmodel import Field, SQLModel

from scheduler.store.columns import UTCDateTime, utc_column


class SessionForecast(SQLModel, table=True):
    __tablename__ = "session_forecasts"

    session_id: int = Field(primary_key=True)
    median: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    low: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    high: datetime | None = utc_column()
    draws: int = 0
    computed_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
