"""Turns on worker machines through procrastinate (`integrations/turn_queue.py`): its schema is
part of Pacer's migrations."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from procrastinate.schema import SchemaManager
from sqlalchemy import Engine, inspect

from scheduler import db as dbmod

ROOT = Path(__file__).resolve().parents[1]
VENDORED = ROOT / "scheduler" / "migrations" / "versions" / "0007_procrastinate_3_10_0.sql"


def test_the_vendored_schema_is_the_pinned_procrastinates_own() -> None:
    assert VENDORED.read_text(encoding="utf-8") == SchemaManager.get_schema(), (
        "procrastinate's schema changed: pin the version migration 0007 vendors, or add a revision applying its SQL migrations"
    )


def test_migrate_gives_postgresql_procrastinates_tables_and_every_database_the_job_column(any_engine: Engine) -> None:
    tables = set(inspect(any_engine).get_table_names())
    assert "job_id" in {c["name"] for c in inspect(any_engine).get_columns("turns")}
    if any_engine.dialect.name == "postgresql":
        assert {"procrastinate_jobs", "procrastinate_workers", "procrastinate_events"} <= tables
        cfg = dbmod.alembic_config(any_engine.url.render_as_string(hide_password=False))
        command.downgrade(cfg, "0006")
        try:
            assert not any(t.startswith("procrastinate") for t in inspect(any_engine).get_table_names())
        finally:
            command.upgrade(cfg, "head")
        assert "procrastinate_jobs" in inspect(any_engine).get_table_names()
    else:
        assert not any(t.startswith("procrastinate") for t in tables)
