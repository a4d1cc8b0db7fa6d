"""One scheduler per job store: on PostgreSQL a session-level advisory lock elects the leader.

APScheduler 3.x has no cross-process coordination, so only the process holding the lock runs
the alarms and sweeps; another `pacer serve` on the same database stands by and takes over
within one retry interval of the leader's connection closing (a crash releases the lock).
SQLite is one file on one machine: an exclusive `flock` on `<database>.leader` elects the
leader among the processes sharing it (a `pacer serve` and a `pacer console`, say), and the OS
releases it when the holder dies. An in-memory database has one process by definition.

A leading `pacer serve` also says where it answers (`advertise`), on the lock itself: the lock
file's text on SQLite, the lock connection's application_name on PostgreSQL. `pacer console`
reads it with `leader_address` instead of guessing from PACER_HOST and PACER_PORT, which a
`--port` or a bind on 0.0.0.0 would make wrong.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger("pacer.leader")

LOCK_KEY = 0x5041_4345  # "PACE"
RETRY_SECONDS = 10.0
ADDRESS_PREFIX = "pacer "  # application_name of the lock connection: "pacer http://host:port"


class Leadership:
    def __init__(self, engine: Engine, on_elected: Callable[[], None], *, retry_seconds: float = RETRY_SECONDS) -> None:
        self.engine = engine
        self.on_elected = on_elected
        self.retry_seconds = retry_seconds
        self.is_leader = False
        self._conn: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.address: str | None = None
        self._recording = threading.Lock()

    def start(self) -> bool:
        """Try once now; if another process leads, keep trying in the background."""
        if self._try():
            return True
        log.warning("another Pacer process leads the scheduler on this database; standing by")
        self._thread = threading.Thread(target=self._wait, name="pacer-leader", daemon=True)
        self._thread.start()
        return False

    def _try(self) -> bool:
        if self.engine.dialect.name == "sqlite":
            return self._try_file()
        conn = self.engine.connect()
        got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": LOCK_KEY}).scalar())
        conn.commit()
        if not got:
            conn.close()
            return False
        self._conn = conn  # held open: the lock lives as long as this connection
        self._elected()
        return True

    def _try_file(self) -> bool:
        import fcntl

        database = self.engine.url.database
        if not database or database == ":memory:":
            self._elected()
            return True
        handle = open(f"{database}.leader", "a+")  # noqa: SIM115 — held for the process's life
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._conn = handle
        self._elected()
        return True

    def _wait(self) -> None:
        while not self._stop.wait(self.retry_seconds):
            try:
                if self._try():
                    return
            except Exception:
                log.exception("leader election attempt failed; retrying")

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
                if hasattr(self._conn, "execute"):  # a pooled connection may carry an earlier leader's name
                    name = ADDRESS_PREFIX + self.address if self.address else ""
                    self._conn.execute(text("SELECT set_config('application_name', :a, false)"), {"a": name})
                    self._conn.commit()
                elif self._conn is not None:
                    self._conn.seek(0)
                    self._conn.truncate()
                    self._conn.write(self.address or "")
                    self._conn.flush()
            except Exception:
                log.exception("recording the leader's address failed; pacer console will use PACER_HOST and PACER_PORT")

    def stop(self) -> None:
        self._stop.set()
        if self._conn is not None:
            try:
                if hasattr(self._conn, "execute"):
                    self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": LOCK_KEY})
                self._conn.close()
            except Exception:
                log.exception("releasing the leader lock failed (closing the connection releases it)")
            self._conn = None
        self.is_leader = False


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
