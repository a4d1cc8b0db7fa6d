"""Two `pacer serve` processes on one PostgreSQL database (P12), as they run in production: the
first leads by the advisory lock, the second stands by, and each runs the turns of the sessions
that arrived through it. A stand-in agent logs every run it starts, so a turn run twice shows.

  * kill -9 the leader: the standby takes over and leaves its own running turns alone (their
    leases are renewed), and runs each of the dead leader's turns again once their leases have
    run out: every attempt once, every session done.
  * sessions held through the standby each have exactly one re-check in the shared job store,
    and the queue pass the standby asks for when its turn ends runs on the leader at once, not
    at the leader's next own alarm.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, text

from bot.runtime.leader import LOCK_KEY, leader_address
from bot.serve.demo import wait_until_up
from integrations.apscheduler_deferrer import APSchedulerDeferrer, build_scheduler
from integrations.shared_alarms import AlarmListener, SharedDeferrer
from scheduler.store import db as dbmod
from tests.support.cluster import scratch_database
from tests.support.custody_support import agent_python, custody_settings, make_room, remove_room, require_custody
from tests.support.paths import ROOT

TOKEN = "replicas-test-token"

# A stand-in for a coding agent: logs "<session> <turn>" as it starts, works for the seconds its
# prompt names ("sleep=N"), or one second when it continues a session it has worked on before
# (as an agent's --resume picks up where it left off).
AGENT = """
import json, os, re, sys, time
session, turn = sys.argv[1], sys.argv[2]
prompt = sys.stdin.read()
log = "runs.log"  # in its session's working directory: the one place an agent in custody may write
seen = open(log).read().split("\\n") if os.path.exists(log) else []
again = any(line.split(" ")[0] == session for line in seen if line)
with open(log, "a") as f:
    f.write(f"{session} {turn} {os.getpid()} {time.time()}\\n")
asked = re.search(r"sleep=([0-9.]+)", prompt)
time.sleep(1.0 if again or not asked else float(asked.group(1)))
print(json.dumps({"type": "result", "is_error": False, "result": "ok", "total_cost_usd": 0.001, "session_id": f"agent-{session}"}))
"""


FIRED = threading.Event()


def fire(*_ids: object) -> None:
    """An alarm target APScheduler can find again by its import path."""
    FIRED.set()


def test_a_standby_stores_its_alarms_and_only_the_leader_fires_them(any_engine: Engine) -> None:
    FIRED.clear()
    postgres = any_engine.dialect.name == "postgresql"
    leader, standby = build_scheduler(any_engine), build_scheduler(any_engine)
    listener = AlarmListener(any_engine, leader.wakeup)
    standby.start(paused=True)
    if postgres:  # asleep with nothing to do: only the standby's notice can wake it
        leader.start()
        listener.start()
        time.sleep(1)
    try:
        SharedDeferrer(APSchedulerDeferrer(standby), standby, any_engine).schedule(
            "recheck:7", datetime.now(UTC), fire, 7
        )
        if not postgres:
            assert not FIRED.wait(1)  # the standby's paused scheduler fires nothing...
            assert _rows(any_engine, "SELECT id FROM apscheduler_jobs") == [
                ("recheck:7",)
            ]  # ...and kept it in the store
            leader.start()
        assert FIRED.wait(10), "the leader never fired the standby's alarm"
        assert _until(lambda: _rows(any_engine, "SELECT id FROM apscheduler_jobs") == [], 5)  # fired once, and gone
    finally:
        listener.stop()
        for scheduler in (leader, standby):
            if scheduler.running:
                scheduler.shutdown(wait=False)


@pytest.fixture
def database_url() -> Iterator[str]:
    with scratch_database("pacer_p12") as url:
        yield url


class Replicas:
    """`pacer serve` processes on one database, each on its own port, their agents in the custody
    that ships, each logging its runs in its session's working directory."""

    def __init__(self, tmp: Path, url: str, **settings: str) -> None:
        self.tmp, self.url = tmp, url
        require_custody()
        self.room = make_room(**{"agent.py": AGENT})
        atexit.register(remove_room, self.room)
        self.agent = self.room / "bin" / "agent.py"
        self.settings = settings
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ports: list[int] = []

    def serve(self, name: str) -> int:
        """Start one process and wait until it answers; its index."""
        port = _port()
        env = {
            **os.environ, "PYTHONPATH": str(ROOT), "PACER_PORT": str(port), "PACER_API_TOKEN": TOKEN,
            "DATABASE_URL": self.url, "PACER_RUNNER": "command",
            "PACER_RUNNER_COMMAND": f"{agent_python()} {self.agent} {{session_id}} {{turn_id}}",
            "PACER_WORKDIR": str(self.room / "work"), "PACER_WORKSPACES": str(self.room / "workspaces"),
            "PACER_LOG_LEVEL": "INFO", **custody_settings(self.room, "shipped"), **self.settings,
        }
        log = (self.tmp / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve"], cwd=self.tmp, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        self.procs.append(proc)
        self.ports.append(port)
        if not wait_until_up(f"http://127.0.0.1:{port}", 30, alive=lambda: proc.poll() is None):
            raise AssertionError((self.tmp / f"{name}.log").read_text()[-4000:])
        return len(self.procs) - 1

    def new(self, index: int, prompt: str, cls: str) -> int:
        api = f"http://127.0.0.1:{self.ports[index]}/api/v1/sessions"
        r = httpx.post(
            api,
            json={"prompt": prompt, "scheduling_class": cls},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        assert r.status_code == 201, r.text
        return int(r.json()["session"]["id"])

    def runs(self) -> list[tuple[int, int]]:
        """(session, turn) for every run the agent started, in order."""
        lines = [
            line.split()
            for log in (self.room / "work").glob("session-*/runs.log")
            for line in log.read_text().splitlines()
            if line
        ]
        return [(int(s), int(t)) for s, t, _pid, _at in sorted(lines, key=lambda fields: float(fields[3]))]

    def logs(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until(what: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.2)
    return what()


def _rows(engine: Engine, sql: str, **params: object) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql), params)]


def _leader_pid(engine: Engine) -> int | None:
    rows = _rows(
        engine,
        "SELECT a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.objid = :k "
        "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        k=LOCK_KEY,
    )
    return int(rows[0][0]) if rows else None


@pytest.mark.long
def test_a_killed_leaders_turns_run_again_once_and_the_survivors_own_run_on(database_url: str, tmp_path: Path) -> None:
    replicas = Replicas(tmp_path, database_url, PACER_TURN_LEASE_SECONDS="2", PACER_MAX_SESSIONS="10")
    engine = dbmod.make_engine(database_url)
    try:
        leader = replicas.serve("leader")
        standby = replicas.serve("standby")
        first_holder = _leader_pid(engine)
        assert first_holder is not None
        on_leader = [replicas.new(leader, f"leader's work {i} sleep=30", "priority") for i in range(3)]
        on_standby = [replicas.new(standby, f"standby's work {i} sleep=8", "priority") for i in range(3)]
        assert _until(lambda: len(replicas.runs()) == 6, 15), replicas.runs()
        owners = dict(_rows(engine, "SELECT session_id, owner FROM turns"))
        assert len({owners[s] for s in on_leader}) == 1 and len({owners[s] for s in on_standby}) == 1
        assert owners[on_leader[0]] != owners[on_standby[0]]

        replicas.procs[leader].send_signal(signal.SIGKILL)
        replicas.procs[leader].wait(timeout=10)
        # The standby takes the lock within its retry interval, while its own turns still run.
        assert _until(lambda: _leader_pid(engine) not in (None, first_holder), 15), "the standby did not take over"
        standing = _rows(
            engine, "SELECT count(*) FROM turns WHERE status = 'running' AND owner = :o", o=owners[on_standby[0]]
        )
        assert standing[0][0] > 0, "the standby's turns ended before it led: nothing here would show a double run"

        every = on_leader + on_standby
        done = lambda: _rows(engine, "SELECT count(*) FROM sessions WHERE status = 'done'")[0][0] == len(every)  # noqa: E731
        assert _until(done, 40), (
            _rows(engine, "SELECT session_id, status, outcome, owner FROM turns ORDER BY id"),
            replicas.logs("standby")[-3000:],
        )
    finally:
        replicas.stop()

    runs = replicas.runs()
    assert [turn for turn, count in Counter(t for _s, t in runs).items() if count > 1] == []  # each attempt ran once
    turns = _rows(engine, "SELECT session_id, id, status, outcome FROM turns ORDER BY id")
    engine.dispose()
    by_session: dict[int, list[tuple[str, str | None]]] = {}
    for session, _turn, status, outcome in turns:
        by_session.setdefault(session, []).append((status, outcome))
    for session in on_standby:  # never taken from its living owner
        assert by_session[session] == [("done", "success")], by_session
    for session in on_leader:  # taken once its lease ran out, and run once more
        assert by_session[session] == [("failed", "interrupted"), ("done", "success")], by_session
    assert sorted(s for s, _t in runs) == sorted(on_standby + on_leader * 2)


@pytest.mark.long
def test_sessions_held_through_the_standby_have_one_recheck_and_its_queue_pass_runs_at_once(
    database_url: str, tmp_path: Path
) -> None:
    # A long lease: the leader's own next alarm (the lease sweep, every half lease) is 30 s
    # away, so a spot session starting sooner shows the standby's request woke the leader.
    replicas = Replicas(tmp_path, database_url, PACER_TURN_LEASE_SECONDS="60", PACER_MAX_SESSIONS="1")
    engine = dbmod.make_engine(database_url)
    try:
        replicas.serve("leader")
        standby = replicas.serve("standby")
        busy = replicas.new(standby, "hold the only slot sleep=4", "priority")
        held = [replicas.new(standby, f"spot work {i}", "spot") for i in range(3)]
        jobs = [
            job for (job,) in _rows(engine, "SELECT id FROM apscheduler_jobs WHERE id LIKE 'recheck:%' ORDER BY id")
        ]
        assert sorted(jobs) == sorted(f"recheck:{s}" for s in held)
        reasons = _rows(
            engine, "SELECT hold_reason FROM sessions WHERE id IN (:a, :b, :c)", a=held[0], b=held[1], c=held[2]
        )
        assert reasons == [("fleet_at_cap",)] * 3

        every = [busy, *held]
        done = lambda: _rows(engine, "SELECT count(*) FROM sessions WHERE status = 'done'")[0][0] == len(every)  # noqa: E731
        assert _until(done, 25), (
            _rows(engine, "SELECT session_id, status, started_at, finished_at FROM turns ORDER BY id"),
            replicas.logs("leader")[-3000:],
        )

        # The database drops the leader's lock session (a restart, a network cut): the lock is
        # free for the standby at once, so the old leader must stop firing alarms, and does.
        holder = _leader_pid(engine)
        _rows(engine, "SELECT pg_terminate_backend(:pid)", pid=holder)
        cut = time.monotonic()
        assert _until(lambda: _leader_pid(engine) not in (None, holder), 10), "the standby did not take the freed lock"
        assert leader_address(engine) == f"http://127.0.0.1:{replicas.ports[standby]}"
        assert _until(lambda: "stepping down to stand by" in replicas.logs("leader"), 5), replicas.logs("leader")[
            -3000:
        ]
        print(
            f"the lock's session dropped: the old leader stood down and the standby led {time.monotonic() - cut:.1f} "
            f"s later"
        )
    finally:
        replicas.stop()

    [(freed_at, busy_owner)] = _rows(engine, "SELECT finished_at, owner FROM turns WHERE session_id = :s", s=busy)
    [(next_start, next_owner)] = _rows(
        engine, "SELECT started_at, owner FROM turns WHERE session_id <> :s ORDER BY started_at LIMIT 1", s=busy
    )
    engine.dispose()
    waited = (next_start - freed_at).total_seconds()
    print(f"a queue pass asked on the standby started the next turn on the leader {waited:.3f} s after the slot freed")
    assert next_owner != busy_owner  # the leader ran the pass the standby asked for
    assert 0 <= waited < 10, waited
    runs = replicas.runs()
    assert sorted(s for s, _t in runs) == sorted(every) and len({t for _s, t in runs}) == len(every)
