"""Alembic environment: Pacer's tables, and APScheduler's job table, whose shape APScheduler
owns (a migration creates it; autogenerate leaves it alone).

`pacer migrate` passes the URL; plain `alembic` (alembic.ini at the repository root) reads
DATABASE_URL.
"""

from __future__ import annotations

import os
from typing import Any

from alembic import context
from sqlmodel import SQLModel

import scheduler.store.models  # noqa: F401  (registers the tables)
from scheduler.store.db import PACER_TABLE_PREFIXES, make_engine

config = context.config
target_metadata = SQLModel.metadata


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    if type_ == "table":
        return name in PACER_TABLE_PREFIXES
    return True


def url_from_environment() -> str:
    """DATABASE_URL as `pacer migrate` reads it: Fly's postgres:// form becomes psycopg 3's."""
    url = os.environ.get("DATABASE_URL") or "sqlite:///./var/pacer.db"
    for plain in ("postgres://", "postgresql://"):
        if url.startswith(plain):
            return "postgresql+psycopg://" + url[len(plain) :]
    return url


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url") or url_from_environment()
    connectable = config.attributes.get("connection")
    if connectable is not None:
        _run(connectable, url)
        return
    engine = make_engine(url)
    with engine.connect() as connection:
        _run(connection, url)
    engine.dispose()


def _run(connection: Any, url: str) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=url.startswith("sqlite"),
        include_name=include_name,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
