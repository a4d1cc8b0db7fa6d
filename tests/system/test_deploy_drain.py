"""SIGTERM to a real `pacer serve`, as a Fly deploy sends it: a turn that fits in
PACER_DRAIN_SECONDS finishes; a longer one is handed over, held again and due at once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from scheduler.store import db as dbmod
from tests.support.paths import ROOT

TOKEN = "drain-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tmp: Path, port: int, echo_seconds: str, drain_seconds: str) -> subprocess.Popen[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PACER_", "SLACK_", "GITHUB_", "FLY_")) and k != "DATABASE_URL"
    }
    env.update(PYTHONPATH=str(ROOT), DATABASE_URL=f"sqlite:///{tmp}/pacer.db", PACER_API_TOKEN=TOKEN,
               PACER_ECHO_SECONDS=echo_seconds, PACER_DRAIN_SECONDS=drain_seconds)
    return subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--port", str(port)], cwd=tmp, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _running_turn(tmp: Path, port: int, server: subprocess.Popen[str]) -> int:
    api = f"http://127.0.0.1:{port}/api/v1"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    assert server.poll() is None, server.stderr.read() if server.stderr else ""
    made = httpx.post(f"{api}/sessions", json={"prompt": "work", "scheduling_class": "priority"},
                      headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert made.status_code == 201, made.text
    session_id = int(made.json()["session"]["id"])
    engine = dbmod.make_engine(f"sqlite:///{tmp}/pacer.db")
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            if conn.execute(
                text("SELECT count(*) FROM turns WHERE session_id = :s AND status = 'running'"), {"s": session_id}
            ).scalar():
                return session_id
        time.sleep(0.1)
    pytest.fail("the turn never started")


def _stop(server: subprocess.Popen[str]) -> tuple[float, str]:
    started = time.monotonic()
    server.send_signal(signal.SIGTERM)
    _, log = server.communicate(timeout=120)
    return time.monotonic() - started, log


def _rows(tmp: Path, session_id: int) -> tuple[list[tuple[str, str | None]], tuple[str, str | None]]:
    engine = dbmod.make_engine(f"sqlite:///{tmp}/pacer.db")
    with engine.connect() as conn:
        turns = [
            tuple(r)
            for r in conn.execute(
                text("SELECT status, outcome FROM turns WHERE session_id = :s ORDER BY id"), {"s": session_id}
            )
        ]
        session = tuple(
            conn.execute(text("SELECT status, hold_reason FROM sessions WHERE id = :s"), {"s": session_id}).one()
        )
    return turns, session  # type: ignore[return-value]


@pytest.mark.long
def test_a_turn_that_fits_in_the_drain_finishes_before_the_process_exits(tmp_path: Path) -> None:
    port = _free_port()
    server = _serve(tmp_path, port, echo_seconds="3", drain_seconds="60")
    session_id = _running_turn(tmp_path, port, server)
    took, log = _stop(server)
    assert server.returncode in (0, -signal.SIGTERM), log  # uvicorn ends by re-raising the signal it caught
    turns, session = _rows(tmp_path, session_id)
    assert turns == [("done", "success")] and session == ("done", None), log
    assert took < 60


@pytest.mark.long
def test_a_turn_longer_than_the_drain_is_handed_over(tmp_path: Path) -> None:
    port = _free_port()
    server = _serve(tmp_path, port, echo_seconds="600", drain_seconds="1")
    session_id = _running_turn(tmp_path, port, server)
    took, log = _stop(server)
    assert server.returncode in (0, -signal.SIGTERM), log  # uvicorn ends by re-raising the signal it caught
    turns, session = _rows(tmp_path, session_id)
    assert turns == [("failed", "interrupted")] and session == ("waiting", "interrupted"), log
    assert "handed to the next leader" in log
    assert took < 30, f"stopping took {took:.1f} s with a 1 s drain"
