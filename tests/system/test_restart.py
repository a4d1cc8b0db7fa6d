"""A restart after downtime, in the configuration that ships: a real `pacer serve` with APScheduler's
job store in the same database (a SQLite file, and PostgreSQL), killed with SIGKILL while spot
sessions are held, then started again after their re-checks fell due — one re-check still in the
job store but fifteen minutes overdue, one lost from it altogether.

It starts, the lost re-check is re-armed exactly once, and both held turns run with their own
prompts (seed 001, "A hold that loses its re-check")."""

from __future__ import annotations

import os
import pickle
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from apscheduler.triggers.date import DateTrigger
from sqlalchemy import Engine, text, update
from sqlmodel import col

from bot.serve.demo import wait_until_up
from scheduler.store import db as dbmod
from scheduler.store.models import Session
from tests.support.cluster import scratch_database
from tests.support.paths import ROOT

TOKEN = "restart-test-token"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/pacer.db"
        return
    with scratch_database("pacer_restart") as url:
        yield url


def _serve(tmp: Path, port: int, url: str, echo_seconds: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ, "PYTHONPATH": str(ROOT), "PACER_PORT": str(port), "PACER_API_TOKEN": TOKEN,
        "DATABASE_URL": url, "PACER_MAX_SESSIONS": "1", "PACER_ECHO_SECONDS": echo_seconds,
        "PACER_ECHO_COST_USD": "0.001", "PACER_LOG_LEVEL": "INFO",
        "PACER_TURN_LEASE_SECONDS": "2",  # the killed server's turn comes back once its lease runs out
    }
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve"], cwd=tmp, env=env,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)
    if wait_until_up(f"http://127.0.0.1:{port}", 25, alive=lambda: proc.poll() is None):
        return proc
    proc.kill()
    raise AssertionError(log.read_text())


def _engine(url: str) -> Engine:
    from bot.config.rules import database_url as driver_url

    return dbmod.make_engine(driver_url("DATABASE_URL", url))


def _overdue(engine: Engine, session_id: int, at: datetime, *, keep_alarm: bool) -> None:
    """What downtime leaves behind: the hold's stamp in the past and its alarm either still in
    the job store with that past run time (armed, late) or gone (lost)."""
    with engine.begin() as conn:
        conn.execute(update(Session).where(col(Session.id) == session_id).values(hold_retry_at=at))
        job_id = f"recheck:{session_id}"
        if not keep_alarm:
            conn.execute(text("DELETE FROM apscheduler_jobs WHERE id = :id"), {"id": job_id})
            return
        (state,) = conn.execute(text("SELECT job_state FROM apscheduler_jobs WHERE id = :id"), {"id": job_id}).one()
        job = pickle.loads(state)
        job["trigger"] = DateTrigger(run_date=at, timezone="UTC")
        job["next_run_time"] = at
        conn.execute(text("UPDATE apscheduler_jobs SET job_state = :s, next_run_time = :t WHERE id = :id"),
                     {"s": pickle.dumps(job, pickle.HIGHEST_PROTOCOL), "t": at.timestamp(), "id": job_id})


@pytest.mark.long
def test_restart_after_downtime_rearms_the_lost_recheck_once(tmp_path: Path, database_url: str) -> None:
    from tests.system.test_crash import _port

    port = _port()
    log = tmp_path / "serve.log"
    api = f"http://127.0.0.1:{port}/api/v1"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    server = _serve(tmp_path, port, database_url, "120", log)  # the priority turn holds the only slot
    try:
        busy = httpx.post(
            f"{api}/sessions",
            json={"prompt": "priority work", "scheduling_class": "priority"},
            headers=auth,
            timeout=10,
        )
        assert busy.status_code == 201, busy.text
        late, lost = (
            httpx.post(f"{api}/sessions", json={"prompt": f"spot job {name}"}, headers=auth, timeout=10).json()[
                "session"
            ]["id"]
            for name in ("late", "lost")
        )
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=20)

    engine = _engine(database_url)
    try:
        with engine.connect() as conn:
            held = conn.execute(
                text("SELECT id, hold_prompt FROM sessions WHERE hold_reason IS NOT NULL ORDER BY id")
            ).all()
        assert [tuple(r) for r in held] == [(late, "spot job late"), (lost, "spot job lost")]
        fifteen_ago = datetime.now(UTC) - timedelta(minutes=15)
        _overdue(engine, late, fifteen_ago, keep_alarm=True)
        _overdue(engine, lost, fifteen_ago, keep_alarm=False)

        started = time.monotonic()
        # The replayed priority turn holds the only slot for a while, so the held sessions are
        # still overdue when start-up sweeps for lost re-checks.
        server = _serve(tmp_path, port, database_url, "2", log)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with engine.connect() as conn:
                    done = conn.execute(text("SELECT count(*) FROM sessions WHERE status = 'done'")).scalar()
                if done == 3:
                    break
                time.sleep(0.3)
            took = time.monotonic() - started
            with engine.connect() as conn:
                prompts = sorted(p for (p,) in conn.execute(text("SELECT prompt FROM turns WHERE status = 'done'")))
            assert prompts == ["priority work", "spot job late", "spot job lost"], (prompts, log.read_text()[-4000:])
            assert took < 30, f"the restarted server took {took:.1f} s to run three two-second turns"
        finally:
            server.terminate()
            server.wait(timeout=20)
    finally:
        engine.dispose()

    output = log.read_text()
    assert "database is locked" not in output
    assert len(re.findall(rf"session #{lost}: its re-check was lost; re-armed", output)) == 1, output[-4000:]
    assert not re.search(rf"session #{late}: its re-check was lost", output), output[-4000:]
