"""An agent dies with its supervisor, and an attempt runs once: a real `pacer serve` with the command
runner, its agents in the custody that ships, is killed with SIGKILL five times while agents run,
on SQLite and on PostgreSQL. After each kill no agent is left alive without a Pacer process to
supervise it; when the last server has finished the work, every prompt was completed exactly once
and no session was lost.

The stand-in agent appends "start" when it begins and "done" when it completes, in its session's
working directory, and ends at once on SIGTERM (as a CLI agent does): a prompt completed twice,
or an orphan that finished unsupervised, shows as a second "done". Each kill lands while every agent
is mid-turn, however slow the machine: until the test releases them (a file in their `bin/`, made
after the last kill), agents do not finish, as a real turn runs for minutes. So the one window left
by design, an agent done but its result not yet committed (40–80 ms measured on this machine), is
never hit; it is no orphan and not what this test is about."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from bot.serve.demo import wait_until_up
from scheduler.store import db as dbmod
from tests.support.cluster import scratch_database
from tests.support.custody_support import (
    agent_processes,
    agent_python,
    custody_settings,
    make_room,
    remove_room,
    require_custody,
)
from tests.support.paths import ROOT
from tests.system.test_crash import _port

TOKEN = "agent-crash-token"
KILLS = 5
SESSIONS_A_ROUND = 4
SERVE_UP_SECONDS = 60  # a server starting beside a loaded CI run (load 13) has taken 29 s to answer
AGENT = """
import json, os, re, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
prompt = sys.stdin.read()
with open("done.log", "a") as f:
    f.write(f"start {os.getpid()}\\n")
held_until = time.monotonic() + 120  # a turn's length, until the test lets the agents finish
while not os.path.exists(os.path.join(os.path.dirname(__file__), "release")) and time.monotonic() < held_until:
    time.sleep(0.05)
time.sleep(float(re.search(r"sleep=([0-9.]+)", prompt).group(1)))
with open("done.log", "a") as f:
    f.write(f"done {prompt}\\n")
with open("done_at.log", "a") as f:
    f.write(f"{time.time()} {prompt}\\n")
print(json.dumps({"type": "result", "is_error": False, "result": "ok", "total_cost_usd": 0.001}))
"""


@pytest.fixture
def room() -> Iterator[Path]:
    require_custody()
    room = make_room(**{"crash_agent.py": AGENT})
    try:
        yield room
    finally:
        if not os.environ.get("KEEP_ROOM"):
            remove_room(room)


def _agents(room: Path) -> list[int]:
    return agent_processes(room / "bin" / "crash_agent.py")


def _serve(room: Path, url: str, port: int) -> subprocess.Popen[bytes]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PACER_")},
        "PYTHONPATH": str(ROOT),
        "PACER_PORT": str(port),
        "PACER_API_TOKEN": TOKEN,
        "DATABASE_URL": url,
        "PACER_MAX_SESSIONS": "3",
        "PACER_RUNNER": "command",
        "PACER_RUNNER_COMMAND": f"{agent_python()} {room / 'bin' / 'crash_agent.py'}",
        "PACER_WORKDIR": str(room / "work"),
        "PACER_WORKSPACES": str(room / "workspaces"),
        "PACER_TURN_LEASE_SECONDS": "2",
        "PACER_LOG_LEVEL": "INFO",
        "PACER_WINDOW_5H_USD": "100000",
        "PACER_WINDOW_7D_USD": "1000000",
        **custody_settings(room, "shipped"),
    }
    log = (room / "serve.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve"], cwd=room, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    if not wait_until_up(f"http://127.0.0.1:{port}", SERVE_UP_SECONDS, alive=lambda: proc.poll() is None):
        proc.kill()  # not left to run the work on its own behind the failed test
        proc.wait()
        raise AssertionError((room / "serve.log").read_text()[-4000:])
    return proc


def _until(check: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def _crash_and_finish(room: Path, url: str) -> None:
    rng = random.Random(16)
    engine = dbmod.make_engine(url)
    prompts: list[str] = []
    unsupervised: list[tuple[float, float]] = []  # from each kill to the next server's start
    try:
        for kill in range(KILLS):
            port = _port()
            server = _serve(room, url, port)
            for i in range(SESSIONS_A_ROUND):
                prompt = f"job {kill}-{i} sleep={rng.uniform(0.2, 0.6):.2f}"
                r = httpx.post(
                    f"http://127.0.0.1:{port}/api/v1/sessions",
                    json={"prompt": prompt, "scheduling_class": "priority"},
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    timeout=10,
                )
                assert r.status_code == 201, r.text
                prompts.append(prompt)
            assert _until(lambda: len(_agents(room)) > 0, 15), (room / "serve.log").read_text()[-3000:]
            time.sleep(rng.uniform(0.2, 1.5))  # some agents still starting, all mid-turn: none is released
            server.send_signal(signal.SIGKILL)
            killed_at = time.time()
            server.wait(timeout=10)
            # The leash heard its parent die: each agent is asked to stop, then killed after the grace.
            assert _until(lambda: not _agents(room), 6), (
                f"kill {kill + 1}: agents alive with no supervisor: {_agents(room)}"
            )
            unsupervised.append((killed_at, time.time()))
        (room / "bin" / "release").touch()  # from now on a turn ends: the last server finishes the work
        port = _port()
        server = _serve(room, url, port)
        try:
            def finished() -> bool:
                with engine.connect() as conn:
                    return conn.execute(text("SELECT count(*) FROM sessions WHERE status != 'done'")).scalar() == 0
            assert _until(finished, 120), (room / "serve.log").read_text()[-4000:]
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
        with engine.connect() as conn:
            sessions = conn.execute(text("SELECT count(*) FROM sessions")).scalar()
    finally:
        engine.dispose()
    done = [line.removeprefix("done ") for log in (room / "work").glob("session-*/done.log")
            for line in log.read_text().splitlines() if line.startswith("done ")]
    finished_at = [(float(at), prompt) for log in (room / "work").glob("session-*/done_at.log")
                   for at, prompt in (line.split(" ", 1) for line in log.read_text().splitlines())]
    orphans = [prompt for at, prompt in finished_at if any(k < at < up for k, up in unsupervised)]
    assert orphans == [], f"agents finished after their supervisor was killed: {orphans}"
    twice = sorted({p for p in done if done.count(p) > 1})
    kills = [k for k, _up in unsupervised]
    when = {p: [round(at - max([k for k in kills if k <= at], default=at), 2) for at, q in finished_at if q == p]
            for p in twice}  # each completion, in seconds after the kill before it (it came before any kill: 0)
    assert twice == [], f"prompts completed twice: {twice}; each completion after the last kill, in s: {when}"
    assert sorted(done) == sorted(prompts) and sessions == len(prompts), "a session or a prompt was lost"
    assert not _agents(room)
    print(
        f"{KILLS} kills of pacer serve: {len(prompts)} prompts, each completed once; 0 agents outlived their supervisor"
    )


@pytest.mark.long
def test_killed_serve_on_sqlite_leaves_no_agent_and_runs_each_prompt_once(room: Path) -> None:
    _crash_and_finish(room, f"sqlite:///{room}/pacer.db")


@pytest.mark.long
def test_killed_serve_on_postgresql_leaves_no_agent_and_runs_each_prompt_once(room: Path) -> None:
    with scratch_database("agent_crash") as url:
        _crash_and_finish(room, url)
