"""Store versions: a counter per kept store, bumped by the database itself on every write.

A few small reads are asked by nearly every transaction and change rarely (the policy row, which
hold stores have rows, which states a session-event trigger watches). `caches.kept` reuses such a
read across transactions, and may only do so while nothing wrote the tables it read. A timer
cannot know that when another process writes, and a hook in Pacer's code misses a write made
with a raw statement. A database trigger on each table misses neither, so a kept read is reused
only while `store_versions` says its tables are at the version it was read at: never stale by
more than the instant between reading the versions and reading the rows, on any process.

The triggers are part of the schema: `scheduler/store/migrations/versions/0003_store_versions.py`
creates them for a deployed database, and the metadata's `after_create` hook for a database made
with `create_all` (the tests).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, text
from sqlmodel import SQLModel

# The tables whose reads are kept across transactions.
KEPT_TABLES = ("policy", "operator_holds", "queue_holds", "prerequisites", "triggers")

_PG_FUNCTION = """
CREATE OR REPLACE FUNCTION pacer_bump_store_version() RETURNS trigger AS $$
BEGIN
    UPDATE store_versions SET version = version + 1 WHERE name = TG_ARGV[0];
    RETURN NULL;
END
$$ LANGUAGE plpgsql
"""


def ddl(dialect: str) -> list[str]:
    """The statements that seed `store_versions` and create its triggers on `dialect`."""
    statements = [
        f"INSERT INTO store_versions (name, version) VALUES ('{table}', 0)" for table in KEPT_TABLES
    ]
    if dialect == "postgresql":
        statements.append(_PG_FUNCTION)
        for table in KEPT_TABLES:
            statements.append(
                f"CREATE TRIGGER store_version_{table} AFTER INSERT OR UPDATE OR DELETE ON {table} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION pacer_bump_store_version('{table}')"
            )
            statements.append(  # a TRUNCATE fires no row or INSERT/UPDATE/DELETE trigger
                f"CREATE TRIGGER store_version_{table}_truncate AFTER TRUNCATE ON {table} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION pacer_bump_store_version('{table}')"
            )
        return statements
    for table in KEPT_TABLES:
        for operation in ("INSERT", "UPDATE", "DELETE"):
            statements.append(
                f"CREATE TRIGGER store_version_{table}_{operation.lower()} AFTER {operation} ON {table} "
                f"BEGIN UPDATE store_versions SET version = version + 1 WHERE name = '{table}'; END"
            )
    return statements


def drop_ddl(dialect: str) -> list[str]:
    if dialect == "postgresql":
        return [
            f"DROP TRIGGER IF EXISTS store_version_{t}{kind} ON {t}" for t in KEPT_TABLES for kind in ("", "_truncate")
        ] + ["DROP FUNCTION IF EXISTS pacer_bump_store_version()"]
    return [
        f"DROP TRIGGER IF EXISTS store_version_{t}_{op}" for t in KEPT_TABLES for op in ("insert", "update", "delete")
    ]


def seed(conn: Any) -> None:
    """Put the counters back after a bulk wipe of every table (a test's TRUNCATE)."""
    for table in KEPT_TABLES:
        conn.execute(text(f"INSERT INTO store_versions (name, version) VALUES ('{table}', 0)"))


@event.listens_for(SQLModel.metadata, "after_create")
def _created(_metadata: Any, connection: Any, **kw: Any) -> None:
    if "store_versions" not in {t.name for t in kw.get("tables", ())} and kw.get("tables") is not None:
        return  # a partial create_all that did not make the table
    for statement in ddl(connection.dialect.name):
        connection.execute(text(statement))
