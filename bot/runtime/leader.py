"""One scheduler per job store: on PostgreSQL a session-level advisory lock elects the leader.

APScheduler 3.x has no cross-process coordination, so only the process holding the lock runs
the alarms and sweeps; another `pacer serve` on the same database stands by and takes over
within one retry interval (2 s) of the leader's connection closing (a crash releases the lock).
SQLite is one file on one machine: an exclusive lock on `<database>.leader.lock` (the `filelock`
library: `flock` on Linux and macOS, `msvcrt.locking` on Windows) elects the leader among the
processes sharing it (a `pacer serve` and a `pacer console`, say), and the OS releases it when
the holder dies. An in-memory database has one process by definition.

A leader that loses its lock connection (the database restarted, the network dropped it) no
longer holds the lock, and another process may take it: it pings that connection every retry
interval and steps down at the first failure (`on_deposed`: its scheduler pauses) and stands
by again. TCP keepalives on both ends of the lock connection bound how long a dead peer goes
unnoticed: the server drops a vanished leader's session, and its lock, after about ten seconds
of silence, and the leader's own side gives up on an unanswered ping in as long.

A leading `pacer serve` also says where it answers (`advertise`): in `<database>.leader` on
SQLite (a file beside the lock, which a standby's try may truncate and Windows lets no other
process read while it is locked), in the lock connection's application_name on PostgreSQL.
`pacer console` reads it with `leader_address` instead of guessing from PACER_HOST and
PACER_PORT, which a `--port` or a bind on 0.0.0.0 would make wrong.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from filelock import FileLock, Timeout
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

log = logging.getLogger("pacer.leader")

LOCK_KEY = 0x5041_4345  # "PACE"
RETRY_SECONDS = 2.0  # a standby's try for the lock, and the leader's ping of its lock connection
# Silence after which either end of the lock connection counts the other gone: 4 s idle, then 3
# probes 2 s apart (server: tcp_keepalives_*, set on the session; client: libpq's keepalives_*,
# and tcp_user_timeout for data sent and never acknowledged).
KEEPALIVE = {"idle": 4, "interval": 2, "count": 3}
STOP_WAIT_SECONDS = 5.0  # how long `stop` waits for the election thread (a ping, a try, a `lead`)
_CLIENT_KEEPALIVE = {
    "keepalives": 1, "keepalives_idle": KEEPALIVE["idle"], "keepalives_interval": KEEPALIVE["interval"],
    "keepalives_count": KEEPALIVE["count"], "tcp_user_timeout": 10_000,
}
_SERVER_KEEPALIVE = text(
    "SELECT set_config('tcp_keepalives_idle', :idle, false), set_config('tcp_keepalives_interval', :interval, false),"
    " set_config('tcp_keepalives_count', :count, false)"
)
ADDRESS_PREFIX = "pacer "  # application_name of the lock connection: "pacer http://host:port"


class Leadership:
    def __init__(
        self, engine: Engine, on_elected: Callable[[], None], *, retry_seconds: float = RETRY_SECONDS,
        on_deposed: Callable[[], None] | None = None,
    ) -> None:
        self.engine = engine
        self.on_elected = on_elected
        self.on_deposed = on_deposed
        self._lock_engine: Engine | None = None
        self.retry_seconds = retry_seconds
        self.is_leader = False
        self._conn: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.address: str | None = None
        self._recording = threading.Lock()

    def start(self) -> bool:
        """Try once now; if another process leads, keep trying in the background. On PostgreSQL
        the same thread then watches the lock connection while this process leads."""
        led = self._try()
        if not led:
            log.warning("another Pacer process leads the scheduler on this database; standing by")
        if not led or self.engine.dialect.name != "sqlite":
            self._thread = threading.Thread(target=self._wait, name="pacer-leader", daemon=True)
            self._thread.start()
        return led

    def _try(self) -> bool:
        if self.engine.dialect.name == "sqlite":
            return self._try_file()
        conn = self._lock_connection()
        got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": LOCK_KEY}).scalar())
        conn.commit()
        with self._recording:
            if not got or self._stop.is_set():  # stopping meanwhile: closing the session releases the lock
                conn.close()
                return False
            self._conn = conn  # held open: the lock lives as long as this connection
        self._elected()
        return True

    def _lock_connection(self) -> Any:
        """A connection of its own (not the pool's), kept alive from both ends."""
        if self._lock_engine is None:
            self._lock_engine = create_engine(self.engine.url, poolclass=NullPool, connect_args=_CLIENT_KEEPALIVE)
        conn = self._lock_engine.connect()
        conn.execute(_SERVER_KEEPALIVE, {k: str(v) for k, v in KEEPALIVE.items()})
        return conn

    def _try_file(self) -> bool:
        database = self.engine.url.database
        if not database or database == ":memory:":
            self._elected()
            return True
        # Not thread-local: the election thread may take it and `stop` on another thread gives it back.
        lock = FileLock(f"{database}.leader.lock", timeout=0, thread_local=False)
        try:
            lock.acquire()
        except Timeout:
            return False
        self._conn = _FileLead(lock, f"{database}.leader")
        self._elected()
        return True

    def _wait(self) -> None:
        while not self._stop.wait(self.retry_seconds):
            try:
                if self.is_leader:
                    self._watch()
                elif self._try() and self.engine.dialect.name == "sqlite":
                    return  # a file lock is the process's until it exits: nothing to watch
            except Exception:
                log.exception("leader election attempt failed; retrying")

    def _watch(self) -> None:
        """Still holding the lock? Its connection answering says so: the lock is the session's."""
        try:
            with self._recording:  # one connection, one thread at a time (`advertise` uses it too)
                if self._conn is None:
                    return
                self._conn.execute(text("SELECT 1")).scalar()
                self._conn.commit()
        except Exception as exc:
            if self._stop.is_set():
                return  # stopping: the connection was closed under the ping
            log.error("the leader lock's connection failed (%s); stepping down to stand by", type(exc).__name__)
            self._deposed()

    def _deposed(self) -> None:
        with self._recording:
            self.is_leader = False
            try:
                self._conn.invalidate()
                self._conn.close()
            except Exception:
                log.debug("closing the lost lock connection failed", exc_info=True)
            self._conn = None
        if self.on_deposed is not None:
            self.on_deposed()

    def _elected(self) -> None:
        self.is_leader = True
        log.info("this process leads the scheduler")
        self._record()
        self.on_elected()

    def advertise(self, address: str) -> None:
        """Where this process answers HTTP, recorded on the lock now or once it is elected."""
        self.address = address
        if self.is_leader:
            self._record()

    def _record(self) -> None:
        # A new leader also clears what an earlier holder of the lock file wrote.
        with self._recording:
            try:
                if hasattr(self._conn, "execute"):
                    name = ADDRESS_PREFIX + self.address if self.address else ""
                    self._conn.execute(text("SELECT set_config('application_name', :a, false)"), {"a": name})
                    self._conn.commit()
                elif self._conn is not None:
                    self._conn.write(self.address or "")
            except Exception:
                log.exception("recording the leader's address failed; pacer console will use PACER_HOST and PACER_PORT")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=STOP_WAIT_SECONDS)  # an election under way finishes first, then is undone
        with self._recording:
            self._release()
        self.is_leader = False
        if self._lock_engine is not None:
            self._lock_engine.dispose()

    def _release(self) -> None:
        if self._conn is not None:
            try:
                if hasattr(self._conn, "execute"):
                    self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": LOCK_KEY})
                self._conn.close()
            except Exception:
                log.exception("releasing the leader lock failed (closing the connection releases it)")
            self._conn = None


class _FileLead:
    """A SQLite leader's hold: the file lock, and the file beside it that says where it answers."""

    def __init__(self, lock: FileLock, address_path: str) -> None:
        self.lock = lock
        self.address_path = address_path

    def write(self, address: str) -> None:
        with open(self.address_path, "w") as handle:
            handle.write(address)

    def close(self) -> None:
        self.lock.release()


def leader_address(engine: Engine) -> str | None:
    """The base URL the leading `pacer serve` advertised on this database, or None."""
    try:
        if engine.dialect.name == "sqlite":
            database = engine.url.database
            if not database or database == ":memory:":
                return None
            with open(f"{database}.leader") as handle:
                return handle.read().strip() or None
        with engine.connect() as conn:
            name = conn.execute(
                text("SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                     "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objid = :k "
                     # pg_locks lists every database's locks; an advisory lock is one database's own.
                     "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"),
                {"k": LOCK_KEY},
            ).scalar()
    except (OSError, SQLAlchemyError):
        return None
    return name[len(ADDRESS_PREFIX):] if isinstance(name, str) and name.startswith(ADDRESS_PREFIX) else None
