"""Engines and migrations: SQLite (WAL, foreign keys, busy timeout) or PostgreSQL (psycopg 3)."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, Executable, Result, event, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import StaticPool
from sqlmodel import Session as DBSession
from sqlmodel import create_engine

from scheduler.context import track_transactions

log = logging.getLogger(__name__)

T = TypeVar("T")
store_log = logging.getLogger("pacer.store")  # a hold store read that failed open

MIGRATIONS = Path(__file__).parent / "migrations"
PACER_TABLE_PREFIXES = (
    "sessions", "turns", "triggers", "enqueued_messages", "human_messages", "policy",
    "policy_audit", "operator_holds", "queue_holds", "prerequisites", "webhook_deliveries",
    "slack_events", "slack_home_viewers", "status_comments", "store_versions", "top_up_state",
    "preemption_events", "budget_notices", "idempotency_keys", "provider_readings", "session_forecasts",
    "spacing_buckets",
)


def make_engine(url: str, *, echo: bool = False) -> Engine:
    engine = _make_engine(url, echo=echo)
    track_transactions(engine)
    return engine


def _make_engine(url: str, *, echo: bool = False) -> Engine:
    if url.startswith("sqlite"):
        in_memory = url in {"sqlite://", "sqlite:///:memory:"}
        if not in_memory:
            path = url.split("///", 1)[-1]
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
        if in_memory:
            kwargs["poolclass"] = StaticPool
        engine = create_engine(url, echo=echo, **kwargs)
        _configure_sqlite(engine, wal=not in_memory)
        return engine
    return create_engine(url, echo=echo, pool_pre_ping=True, pool_recycle=600, pool_size=10, max_overflow=20)


def _configure_sqlite(engine: Engine, *, wal: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from the driver so BEGIN IMMEDIATE is ours to issue.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        if wal:
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Read-then-write must not be upgraded mid-transaction (SQLITE_BUSY): take the write
        # lock up front. with_for_update() is a no-op on SQLite, so this is the guard.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def alembic_config(url: str) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def migrate(url: str) -> None:
    """Bring the schema to head through Alembic."""
    from alembic import command

    command.upgrade(alembic_config(url), "head")


@contextmanager
def session_scope(engine: Engine) -> Iterator[DBSession]:
    """One unit of work: commit on success, roll back on any error."""
    with DBSession(engine, expire_on_commit=False) as db:
        try:
            yield db
            db.commit()
        except BaseException:
            db.rollback()
            raise


@contextmanager
def deciding_scope(engine: Engine, *, wait: str | None = "30s") -> Iterator[DBSession]:
    """`session_scope` for a transaction that may start a turn: the deciders' lock first,
    before any row lock (`one_decider`)."""
    with session_scope(engine) as db:
        one_decider(db, wait=wait)
        yield db


# The transaction-level advisory lock every transaction that may start a turn takes: "PACD".
DECIDER_LOCK_KEY = 0x5041_4344


def one_decider(db: DBSession, *, wait: str | None = "30s") -> None:
    """Take the deciders' lock for the rest of this transaction (PostgreSQL; a no-op on SQLite,
    whose one writer at a time, `BEGIN IMMEDIATE`, already is such a lock).

    Admission reads the fleet, the concurrency groups' occupants and the budget, then starts a
    turn on what it read. Two transactions doing that at once, on two threads or two replicas,
    both see the last free slot: measured before this lock, with max_sessions 5 and eight
    threads, 8 to 11 turns ran, and 8 at once in one concurrency group (seed 002: never more
    than one). So deciders take turns across every process on the database.

    Taken first, before any row lock: a transaction holding a session's row while it waits for
    this lock, and the holder waiting for that row, would deadlock. Entry points that decide
    open their transaction with `deciding_scope`; `admit` calls it again, a no-op
    then, so a path that forgot still decides under the lock. Held until commit or rollback.

    `wait` bounds the wait for the lock alone (PostgreSQL's lock_timeout, set for that one
    statement and put back after it): a decision takes milliseconds and a batch of them well
    under a second, so a 30 s wait is a transaction deciding inside another one's, which would
    wait for ever, and it fails loudly instead. None waits as long as it takes: a turn's
    completion, whose failure would cost the turn's whole run."""
    transaction = db.get_transaction()
    if transaction is not None and db.info.get("pacer.decider") is transaction:
        return
    if db.get_bind().dialect.name == "postgresql":
        db.connection().execute(_DECIDER_LOCK, {"key": DECIDER_LOCK_KEY, "wait": wait or "0"})
    db.info["pacer.decider"] = db.get_transaction()


# One round trip: lock_timeout set, the lock taken, lock_timeout put back (read first:
# MATERIALIZED, or the read would be inlined after the set). The target list runs left to right.
_DECIDER_LOCK = text(
    "WITH before AS MATERIALIZED (SELECT current_setting('lock_timeout') AS timeout)"
    " SELECT set_config('lock_timeout', :wait, true), pg_advisory_xact_lock(:key), set_config('lock_timeout', "
    "before.timeout, true)"
    " FROM before"
)


# The transaction-level advisory locks a steered issue's deliveries take, in PostgreSQL's
# two-key space (never the deciders' one-key lock): "PACS", then a hash of the key.
STEERING_LOCK_SPACE = 0x5041_4353
_STEERING_LOCK = text("SELECT pg_advisory_xact_lock(:space, :key)")


def steer_in_turn(db: DBSession, key: str) -> None:
    """Wait for the transactions that took `key`'s steering lock before this one, and hold it
    until commit or rollback (PostgreSQL; SQLite's one writer at a time already is such a lock).

    What a transaction reads after it is what every earlier one committed: a hold lifted in
    the delivery after the one that placed it finds the hold, on any process, however slow the
    first transaction was. Two keys that hash alike only wait for each other."""
    if db.get_bind().dialect.name == "postgresql":
        digest = zlib.crc32(key.encode())
        db.connection().execute(
            _STEERING_LOCK, {"space": STEERING_LOCK_SPACE, "key": digest - (1 << 32) if digest >= 1 << 31 else digest}
        )


def core(db: DBSession, statement: Executable, params: Mapping[str, Any] | None = None) -> Result[*tuple[Any, ...]]:
    """Run a Core statement (a read of columns, an UPDATE of a few) on the transaction's own
    connection, after flushing what the ORM has pending — what autoflush would have done.

    `db.execute` routes every statement through the ORM's execution layer, which costs about
    70–130 µs a statement on top of SQLite's own ~30 µs; a statement that names columns rather
    than entities needs none of it, and the hot paths (a held session's re-check, the fleet
    read every decision makes) run a few of them each."""
    db.flush()
    return db.connection().execute(statement, dict(params or {}))


def ping(engine: Engine) -> bool:
    with engine.connect() as conn:
        return conn.execute(text("SELECT 1")).scalar() == 1


def read_or_fail_open(db: DBSession, what: str, read: Callable[[], T], fallback: T) -> T:
    """Read a store inside a savepoint; if it cannot be read, log one line and return `fallback`.

    The savepoint matters on PostgreSQL: a failed statement aborts the whole transaction, and
    the queue pass that asked must still be able to start the sessions a hold store would not
    have held (seed 000: "holds fail open … rather than stranding waiters"). SQLite keeps its
    transaction through a failed statement, so there the savepoint is two statements for nothing.
    So it is when the read begins the transaction (a notice's read of the watched states): rolling
    back the whole transaction then undoes exactly what the savepoint would have."""
    first = not db.in_transaction() and not (db.new or db.dirty or db.deleted)  # nothing of its own to undo
    try:
        if first or db.get_bind().dialect.name == "sqlite":
            return read()
        with db.begin_nested():
            return read()
    except SQLAlchemyError as exc:
        if first:
            db.rollback()
        store_log.warning("%s could not be read (%s); admission ignores it this time", what, type(exc).__name__)
        return fallback
