"""Real Pacer processes on one PostgreSQL database, for the tests of worker machines (P12):
`pacer serve` replicas and `pacer worker` processes started with the command runner, and a
stand-in agent that logs every run it starts, so a turn run twice, or never, shows."""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, text

from bot.runtime.leader import leader_address
from bot.serve.demo import wait_until_up
from integrations.apscheduler_deferrer import JOB_TABLE
from scheduler.engine.records import hold_job_id
from scheduler.store import db as dbmod
from tests.conftest import NO_POSTGRES
from tests.support.custody_support import agent_python, custody_settings, make_room, remove_room, require_custody

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "workers-test-token"
LEASE_SECONDS = 2.0
SLOTS = 12  # two workers of six

# A stand-in for a coding agent: logs "<session> <turn> <pid> <epoch>" as it starts, in its session's
# working directory (the one place an agent in custody may write), then works for the seconds its
# prompt names ("sleep=N"), or one second when it continues a session it has worked on before (as an
# agent's --resume picks up where it left off).
AGENT = """
import json, os, re, sys, time
session, turn = sys.argv[1], sys.argv[2]
prompt = sys.stdin.read()
log = "runs.log"
again = os.path.exists(log) and any(line.split(" ")[0] == session for line in open(log).read().splitlines() if line)
with open(log, "a") as f:
    f.write(f"{session} {turn} {os.getpid()} {time.time()}\\n")
asked = re.search(r"sleep=([0-9.]+)", prompt)
time.sleep(1.0 if again or not asked else float(asked.group(1)))
print(json.dumps({"type": "result", "is_error": False, "result": "ok", "total_cost_usd": 0.001, "session_id": f"agent-{session}"}))
"""


@contextmanager
def scratch_database(prefix: str) -> Iterator[str]:
    """A new, empty database beside PACER_TEST_DATABASE_URL's, dropped afterwards; its URL."""
    base = os.environ.get("PACER_TEST_DATABASE_URL")
    if not base:
        if os.environ.get("PACER_REQUIRE_POSTGRES") == "1":
            pytest.fail("PACER_REQUIRE_POSTGRES=1 but PACER_TEST_DATABASE_URL is not set")
        pytest.skip(f"processes sharing one database need PostgreSQL: {NO_POSTGRES}")
    from bot.config.rules import database_url as driver_url

    admin = dbmod.make_engine(driver_url("PACER_TEST_DATABASE_URL", base))
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield base.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


class Cluster:
    """`pacer serve` and `pacer worker` processes on one database, their agents in the custody that
    ships, each logging its runs in its session's working directory."""

    def __init__(self, tmp: Path, url: str) -> None:
        self.tmp, self.url = tmp, url
        require_custody()
        self.room = make_room(**{"agent.py": AGENT})
        atexit.register(remove_room, self.room)  # read after stop(): the runs, the logs
        self.agent = self.room / "bin" / "agent.py"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.urls: dict[str, str] = {}  # each `pacer serve` by name

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PACER_API_TOKEN": TOKEN,
            "PACER_API_ROLE": "operator",
            "DATABASE_URL": self.url,
            "PACER_TURN_QUEUE": "procrastinate",
            "PACER_TURN_LEASE_SECONDS": str(LEASE_SECONDS),
            "PACER_MAX_SESSIONS": str(SLOTS),
            "PACER_AGENT_WORKERS": str(SLOTS),
            "PACER_DRAIN_SECONDS": "2",
            "PACER_RUNNER": "command",
            "PACER_RUNNER_COMMAND": f"{agent_python()} {self.agent} {{session_id}} {{turn_id}}",
            "PACER_WORKDIR": str(self.room / "work"),
            "PACER_WORKSPACES": str(self.room / "workspaces"),
            "PACER_LOG_LEVEL": "INFO",
            **custody_settings(self.room, "shipped"),
            # Spot work waits for slots only: windows too large for the pace to hold it, and no
            # preemption (a preempted session sleeps until the five-minute ceiling sweep).
            "PACER_WINDOW_5H_USD": "100000",
            "PACER_WINDOW_7D_USD": "1000000",
            "PACER_PREEMPTION": "false",
            **extra,
        }

    def start(self, name: str, command: str, **extra: str) -> subprocess.Popen[bytes]:
        log = (self.tmp / f"{name}.log").open("ab")
        proc = subprocess.Popen([sys.executable, "-m", "bot.cli", command], cwd=self.tmp, env=self.env(**extra),
                                stdout=log, stderr=subprocess.STDOUT)
        self.procs[name] = proc
        return proc

    def serve(self, name: str, **extra: str) -> None:
        port = free_port()
        proc = self.start(name, "serve", PACER_PORT=str(port), **extra)
        self.urls[name] = f"http://127.0.0.1:{port}"
        if not wait_until_up(self.urls[name], 30, alive=lambda: proc.poll() is None):
            raise AssertionError(self.logs(name)[-4000:])

    def worker(self, name: str, **extra: str) -> None:
        proc = self.start(name, "worker", **{"PACER_AGENT_WORKERS": str(SLOTS // 2), **extra})
        if (
            not until(lambda: "takes up to" in self.logs(name) or proc.poll() is not None, 30)
            or proc.poll() is not None
        ):
            raise AssertionError(self.logs(name)[-4000:])

    def new(self, client: httpx.Client, serve: str, prompt: str, cls: str) -> int:
        """A new session through the `pacer serve` named; its id."""
        r = client.post(f"{self.urls[serve]}/api/v1/sessions", json={"prompt": prompt, "scheduling_class": cls},
                        headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 201, r.text
        return int(r.json()["session"]["id"])

    def leader(self, engine: Engine) -> str | None:
        """The `pacer serve` that holds the leader lock now, by the address it advertised on it."""
        address = leader_address(engine)
        return next((name for name, url in self.urls.items() if url == address), None)

    def runs(self) -> list[tuple[int, int]]:
        """(session, turn) for every run the agent started, in order."""
        return [(int(s), int(t)) for s, t, _pid, _at in self._log()]

    def started_at(self) -> dict[int, float]:
        """When each turn's agent started (epoch seconds), by turn id."""
        return {int(t): float(at) for _s, t, _pid, at in self._log()}

    def _log(self) -> list[list[str]]:
        lines = [
            line.split()
            for log in (self.room / "work").glob("session-*/runs.log")
            for line in log.read_text().splitlines()
            if line
        ]
        return sorted(lines, key=lambda fields: float(fields[3]))

    def logs(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@dataclass(frozen=True)
class HeldSample:
    """One look at the held sessions and their re-check alarms in the shared job store."""

    held: frozenset[int]  # held long enough for their hold's alarm to have been armed
    wrong: dict[int, tuple[int, bool]]  # held session -> (its re-checks, whether one is due at its retry time)


def held_sample(engine: Engine, settled_seconds: float) -> HeldSample:
    """Every held session's re-check alarms, from one snapshot of the database. A hold's alarm is
    armed just after its transaction commits, so a hold younger than `settled_seconds` is left out."""
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
        held = dict(
            conn.execute(
                text(
                    "SELECT id, extract(epoch FROM hold_retry_at) FROM sessions WHERE status = 'waiting' AND "
                    "hold_reason IS NOT NULL "
                    "AND hold_retry_at IS NOT NULL AND hold_at < now() - make_interval(secs => :settled)"
                ),
                {"settled": settled_seconds},
            ).all()
        )
        jobs = conn.execute(text(f"SELECT id, next_run_time FROM {JOB_TABLE}")).all()  # noqa: S608 - a constant table name
    counted = Counter(job_id for job_id, _at in jobs)
    due = {job_id: at for job_id, at in jobs}
    wrong = {}
    for session, retry_at in held.items():
        job = hold_job_id(session)
        on_time = job in due and abs(float(due[job]) - float(retry_at)) < 1
        if counted[job] != 1 or not on_time:
            wrong[session] = (counted[job], on_time)
    return HeldSample(frozenset(held), wrong)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def until(what: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.1)
    return what()


def rows(engine: Engine, sql: str, **params: object) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql), params)]
