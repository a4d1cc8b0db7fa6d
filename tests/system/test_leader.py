"""Leader election on PostgreSQL: one scheduler per job store; a standby takes over."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.runtime.leader import KEEPALIVE, LOCK_KEY, Leadership


def test_sqlite_elects_one_leader_through_a_lock_file(engine) -> None:
    elected = []
    first = Leadership(engine, lambda: elected.append("first"))
    second = Leadership(engine, lambda: elected.append("second"), retry_seconds=0.05)
    assert first.start() is True
    assert second.start() is False
    first.stop()
    second._thread.join(5)
    assert elected == ["first", "second"] and second.is_leader
    second.stop()


def test_only_one_process_leads_and_a_standby_takes_over(any_engine) -> None:
    if any_engine.dialect.name != "postgresql":
        pytest.skip("advisory locks are a PostgreSQL feature; SQLite is covered above")
    first_elected, second_elected = threading.Event(), threading.Event()
    first = Leadership(any_engine, first_elected.set)
    second = Leadership(any_engine, second_elected.set, retry_seconds=0.05)
    assert first.start() is True and first_elected.is_set()
    assert second.start() is False and not second_elected.is_set()
    first.stop()
    assert second_elected.wait(5), "the standby did not take over"
    assert second.is_leader
    second.stop()


def test_a_leader_that_loses_its_lock_connection_steps_down_and_the_standby_leads(any_engine) -> None:
    """The database dropped the leader's lock session (a restart, a network cut): another process
    may take the lock at once, so the old leader must stop firing alarms. It notices at its next
    ping, steps down, and stands by; when the new leader goes, it leads again."""
    if any_engine.dialect.name != "postgresql":
        pytest.skip("advisory locks are a PostgreSQL feature; a SQLite file lock cannot be lost")
    first_elected, deposed, second_elected = threading.Event(), threading.Event(), threading.Event()
    first = Leadership(any_engine, first_elected.set, retry_seconds=0.05, on_deposed=deposed.set)
    second = Leadership(any_engine, second_elected.set, retry_seconds=0.05)
    assert first.start() is True and second.start() is False
    with first._recording:  # both ends keep the lock connection alive: a vanished peer is noticed in seconds
        assert first._conn.execute(text("SHOW tcp_keepalives_idle")).scalar() == str(KEEPALIVE["idle"])
    first_elected.clear()

    with any_engine.connect() as conn:
        killed = (
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid "
                    "= :k "
                    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                ),
                {"k": LOCK_KEY},
            )
            .scalars()
            .all()
        )
    assert killed == [True]

    assert deposed.wait(5), "the leader did not notice it lost the lock"
    assert second_elected.wait(5), "the standby did not take over"
    assert second.is_leader and not first.is_leader
    second.stop()
    assert first_elected.wait(5), "the old leader did not stand by for the lock"
    assert first.is_leader
    first.stop()


ROOT = Path(__file__).resolve().parents[2]
ELECT_WITHOUT_FCNTL = """
import sys, warnings
sys.modules["fcntl"] = None  # as on Windows: no POSIX file locks
warnings.simplefilter("ignore")
from sqlalchemy import create_engine
from bot.runtime.leader import Leadership, leader_address
engine = create_engine("sqlite:///" + sys.argv[1])
first, second = Leadership(engine, lambda: None), Leadership(engine, lambda: None, retry_seconds=60)
print(first.start(), second.start())
first.advertise("http://127.0.0.1:9")
print(leader_address(engine))
first.stop(); second.stop()
"""


def test_the_sqlite_leader_lock_runs_where_fcntl_does_not(tmp_path) -> None:
    """The README covers Windows, and the default setup (SQLite) elects through a file lock: it
    must not need `fcntl`, which Windows lacks. Here `fcntl` is made unimportable, as there."""
    done = subprocess.run(
        [sys.executable, "-c", ELECT_WITHOUT_FCNTL, str(tmp_path / "pacer.db")],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["True False", "http://127.0.0.1:9"]
