"""The column types every table shares: instants that are UTC on the way in and out, whatever
the database, and JSON with a fresh default per row; and the indexes the queue is read by."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index, Table, text
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on the way out, on SQLite and PostgreSQL alike."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utc_column(*, nullable: bool = True, index: bool = False) -> Any:
    return Field(default=None, sa_column=Column(UTCDateTime(), nullable=nullable, index=index))


def json_column(default: Any = None) -> Any:
    factory = (lambda: dict(default)) if isinstance(default, dict) else (lambda: list(default or []))
    return Field(default_factory=factory, sa_column=Column(JSON, nullable=False))


__all__ = ["UTCDateTime", "json_column", "utc_column"]


def index_the_queue(sessions: Table) -> Table:
    """The sessions table's indexes for a queue pass (`scheduler.engine.candidates`), kept here
    so the models stay one idea a module. The queue's order within a band of a page, so a page
    is read from their head rather than sorted out of every waiting row; and the paused rows,
    few, of which every pass asks for the first. Migration 0029 makes them."""
    c = sessions.c
    Index("ix_sessions_rank", c.status, text("precedence DESC"), c.created_at, c.id)
    by_class = (c.status, c.scheduling_class, c.genesis)
    Index("ix_sessions_class_rank", *by_class, text("precedence DESC"), c.created_at, c.id)
    paused = text("pause_reason IS NOT NULL")
    Index("ix_sessions_paused", c.status, c.paused_by, sqlite_where=paused, postgresql_where=paused)
    return sessions
