"""A kill -9 at any moment loses no session, no prompt and no hold: a real `pacer serve` on
SQLite holds spot sessions at a full fleet, is killed with SIGKILL, restarts, and every held
turn still runs with its own prompt."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.paths import ROOT

TOKEN = "crash-test-token"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(tmp: Path, port: int, echo_seconds: str, **extra: str) -> subprocess.Popen[str]:
    env = {
        **os.environ, "PYTHONPATH": str(ROOT), "PACER_PORT": str(port), "PACER_API_TOKEN": TOKEN,
        "DATABASE_URL": f"sqlite:///{tmp}/pacer.db", "PACER_MAX_SESSIONS": "1",
        "PACER_ECHO_SECONDS": echo_seconds, "PACER_ECHO_COST_USD": "0.001", "PACER_LOG_LEVEL": "INFO",
        "PACER_TURN_LEASE_SECONDS": "2", **extra,  # the killed server's turn comes back once its lease runs out
    }
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve"], cwd=tmp, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(proc.communicate()[0])


def _rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.long
def test_sigkill_loses_no_session_prompt_or_hold(tmp_path: Path) -> None:
    port = _port()
    api = f"http://127.0.0.1:{port}/api/v1"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    server = _serve(tmp_path, port, echo_seconds="60")  # the priority turn holds the only slot
    try:
        busy = httpx.post(
            f"{api}/sessions",
            json={"prompt": "priority work", "scheduling_class": "priority"},
            headers=auth,
            timeout=10,
        )
        assert busy.status_code == 201, busy.text
        held = []
        for i in range(3):
            r = httpx.post(
                f"{api}/sessions", json={"prompt": f"spot job {i}", "precedence": i}, headers=auth, timeout=10
            )
            assert r.status_code == 201, r.text
            held.append(r.json()["session"]["id"] if "session" in r.json() else r.json()["id"])
        jobs = {row[0] for row in _rows(tmp_path / "pacer.db", "SELECT id FROM apscheduler_jobs")}
        assert {f"recheck:{sid}" for sid in held} <= jobs  # the alarms are in the durable job store
    finally:
        server.send_signal(signal.SIGKILL)
        server.communicate(timeout=20)

    db = tmp_path / "pacer.db"
    assert _rows(
        db, "SELECT count(*) FROM sessions WHERE hold_reason = 'fleet_at_cap' AND hold_prompt LIKE 'spot job %'"
    ) == [(3,)]
    server = _serve(tmp_path, port, echo_seconds="0.2")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = _rows(db, "SELECT count(*) FROM sessions WHERE status = 'done'")[0][0]
            if done == 4:
                break
            time.sleep(0.3)
        prompts = sorted(p for (p,) in _rows(db, "SELECT prompt FROM turns WHERE status = 'done'"))
        assert prompts == ["priority work", "spot job 0", "spot job 1", "spot job 2"], prompts
        assert _rows(db, "SELECT count(*) FROM sessions WHERE status != 'done'") == [(0,)]
        interrupted = _rows(db, "SELECT prompt FROM turns WHERE outcome = 'interrupted'")
        assert interrupted == [("priority work",)]
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=20)
