"""Turns on worker machines (P12), as they run in production: two `pacer serve` replicas decide,
two `pacer worker` processes run every turn through procrastinate on one PostgreSQL database,
and a stand-in agent logs each run it starts, so a turn run twice, or never, shows.

Sessions arrive through both replicas, priority and spot; one worker is killed with SIGKILL while
it runs turns. Every attempt runs once (the agent's log against the turn rows), the dead worker's
turns come back once their leases run out and run again on the other worker, and every session
ends done. An archive decided on `pacer serve` stops the agent on the worker, and a worker
stopped with SIGTERM hands a turn that outlasts its drain back for the next worker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, text

from bot.demo import wait_until_up
from scheduler import db as dbmod
from tests.slack_mock import BOT_USER_ID, MockSlack, event_body, signed_headers

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "workers-test-token"
LEASE_SECONDS = 2.0
SESSIONS = 60  # a third priority, the rest spot
SLOTS = 12  # two workers of six

# A stand-in for a coding agent: logs "<session> <turn> <pid> <epoch>" as it starts, then works for the
# seconds its prompt names ("sleep=N"), or one second when it continues a session it has worked on
# before (as an agent's --resume picks up where it left off).
AGENT = """
import json, os, re, sys, time
session, turn = sys.argv[1], sys.argv[2]
prompt = sys.stdin.read()
log = os.environ["P12_AGENT_LOG"]
again = os.path.exists(log) and any(line.split(" ")[0] == session for line in open(log).read().splitlines() if line)
with open(log, "a") as f:
    f.write(f"{session} {turn} {os.getpid()} {time.time()}\\n")
asked = re.search(r"sleep=([0-9.]+)", prompt)
time.sleep(1.0 if again or not asked else float(asked.group(1)))
print(json.dumps({"type": "result", "is_error": False, "result": "ok", "total_cost_usd": 0.001, "session_id": f"agent-{session}"}))
"""


@pytest.fixture
def database_url() -> Iterator[str]:
    base = os.environ.get("PACER_TEST_DATABASE_URL")
    if not base:
        if os.environ.get("PACER_REQUIRE_POSTGRES") == "1":
            pytest.fail("PACER_REQUIRE_POSTGRES=1 but PACER_TEST_DATABASE_URL is not set")
        pytest.skip("worker processes share turns through PostgreSQL (set PACER_TEST_DATABASE_URL)")
    from bot.settings_rules import database_url as driver_url

    admin = dbmod.make_engine(driver_url("PACER_TEST_DATABASE_URL", base))
    name = f"pacer_workers_{uuid.uuid4().hex[:8]}"
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield base.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


class Cluster:
    """`pacer serve` and `pacer worker` processes on one database, sharing one agent log."""

    def __init__(self, tmp: Path, url: str) -> None:
        self.tmp, self.url = tmp, url
        self.agent, self.agent_log = tmp / "agent.py", tmp / "agent.log"
        self.agent.write_text(AGENT)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: list[int] = []

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ, "PYTHONPATH": str(ROOT), "PACER_API_TOKEN": TOKEN, "DATABASE_URL": self.url,
            "PACER_TURN_QUEUE": "procrastinate", "PACER_TURN_LEASE_SECONDS": str(LEASE_SECONDS),
            "PACER_MAX_SESSIONS": str(SLOTS), "PACER_AGENT_WORKERS": str(SLOTS), "PACER_DRAIN_SECONDS": "2",
            "PACER_RUNNER": "command", "PACER_RUNNER_COMMAND": f"{sys.executable} {self.agent} {{session_id}} {{turn_id}}",
            "PACER_WORKDIR": str(self.tmp / "work"), "PACER_WORKSPACES": str(self.tmp / "workspaces"),
            "PACER_LOG_LEVEL": "INFO", "P12_AGENT_LOG": str(self.agent_log),
            # Spot work waits for slots only: windows too large for the pace to hold it, and no
            # preemption (a preempted session sleeps until the five-minute ceiling sweep).
            "PACER_WINDOW_5H_USD": "100000", "PACER_WINDOW_7D_USD": "1000000", "PACER_PREEMPTION": "false", **extra,
        }

    def start(self, name: str, command: str, **extra: str) -> subprocess.Popen[bytes]:
        log = (self.tmp / f"{name}.log").open("ab")
        proc = subprocess.Popen([sys.executable, "-m", "bot.cli", command], cwd=self.tmp, env=self.env(**extra),
                                stdout=log, stderr=subprocess.STDOUT)
        self.procs[name] = proc
        return proc

    def serve(self, name: str, **extra: str) -> None:
        port = _port()
        proc = self.start(name, "serve", PACER_PORT=str(port), **extra)
        self.ports.append(port)
        if not wait_until_up(f"http://127.0.0.1:{port}", 30, alive=lambda: proc.poll() is None):
            raise AssertionError(self.logs(name)[-4000:])

    def worker(self, name: str, **extra: str) -> None:
        proc = self.start(name, "worker", **{"PACER_AGENT_WORKERS": str(SLOTS // 2), **extra})
        if not _until(lambda: "takes up to" in self.logs(name) or proc.poll() is not None, 30) or proc.poll() is not None:
            raise AssertionError(self.logs(name)[-4000:])

    def new(self, client: httpx.Client, index: int, prompt: str, cls: str) -> int:
        r = client.post(f"http://127.0.0.1:{self.ports[index % len(self.ports)]}/api/v1/sessions",
                        json={"prompt": prompt, "scheduling_class": cls}, headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 201, r.text
        return int(r.json()["session"]["id"])

    def runs(self) -> list[tuple[int, int]]:
        """(session, turn) for every run the agent started, in order."""
        if not self.agent_log.exists():
            return []
        return [(int(s), int(t)) for s, t, _pid, _at in (line.split() for line in self.agent_log.read_text().splitlines() if line)]

    def started_at(self) -> dict[int, float]:
        """When each turn's agent started (epoch seconds), by turn id."""
        if not self.agent_log.exists():
            return {}
        return {int(t): float(at) for _s, t, _pid, at in (line.split() for line in self.agent_log.read_text().splitlines() if line)}

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
        # A killed worker's agents outlive it in their own process groups: end them here.
        if self.agent_log.exists():
            for line in self.agent_log.read_text().splitlines():
                try:
                    os.killpg(int(line.split()[2]), signal.SIGKILL)
                except (ProcessLookupError, PermissionError, IndexError, ValueError):
                    pass


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until(what: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.1)
    return what()


def _rows(engine: Engine, sql: str, **params: object) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql), params)]


def test_two_workers_run_every_attempt_once_and_a_killed_ones_turns_come_back(database_url: str, tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, database_url)
    engine = dbmod.make_engine(database_url)
    began = time.monotonic()
    try:
        cluster.serve("serve-a")
        cluster.serve("serve-b")
        cluster.worker("worker-a")
        cluster.worker("worker-b")
        victim = cluster.procs["worker-a"].pid
        with httpx.Client(timeout=10) as client:
            sessions = [cluster.new(client, i, f"work {i} sleep={1.0 + (i % 4) * 0.25}", "priority" if i % 3 == 0 else "spot")
                        for i in range(SESSIONS)]

        def victims_running() -> list[tuple]:
            return _rows(engine, "SELECT id, session_id FROM turns WHERE status = 'running' AND owner LIKE :o", o=f"%:{victim}:%")

        assert _until(lambda: len(cluster.runs()) >= SESSIONS // 4 and len(victims_running()) >= 2, 30), cluster.logs("worker-a")[-3000:]
        cluster.procs["worker-a"].send_signal(signal.SIGKILL)
        killed_at = time.time()
        cluster.procs["worker-a"].wait(timeout=10)
        lost = victims_running()  # what the kill interrupted: leased to a process that is gone

        def all_done() -> bool:
            return _rows(engine, "SELECT count(*) FROM sessions WHERE status = 'done'")[0][0] == SESSIONS

        # Bounded by the work left on the one worker that survives, plus a lease and a sweep.
        assert _until(all_done, 45), (
            _rows(engine, "SELECT id, status, hold_reason FROM sessions WHERE status <> 'done'"),
            _rows(engine, "SELECT id, session_id, status, outcome, owner, job_id FROM turns WHERE status = 'running'"),
            _rows(engine, "SELECT id, status, worker_id, abort_requested FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"),
            cluster.logs("serve-a")[-2000:], cluster.logs("worker-b")[-2000:],
        )
        took = time.monotonic() - began
    finally:
        cluster.stop()

    runs = cluster.runs()
    turns = _rows(engine, "SELECT session_id, id, status, outcome, owner, started_at FROM turns ORDER BY id")
    engine.dispose()
    counted = Counter(turn for _s, turn in runs)
    assert [turn for turn, count in counted.items() if count > 1] == []  # each attempt ran once
    claimed = {turn_id for _s, turn_id, _st, _o, owner, _at in turns if owner is not None}
    assert set(counted) <= claimed  # nothing ran that no worker claimed
    done = [(session, turn_id) for session, turn_id, status, _o, _w, _at in turns if status == "done"]
    assert len(done) == SESSIONS and all(counted[turn_id] == 1 for _s, turn_id in done)  # each session's last attempt ran, once
    by_session: dict[int, list[tuple[str, str | None]]] = {}
    for session, _turn, status, outcome, _owner, _at in turns:
        by_session.setdefault(session, []).append((status, outcome))
    assert lost, "the kill interrupted nothing: this run shows no recovery"
    for _turn_id, session in lost:  # taken from the dead worker once its lease ran out, run once more
        assert by_session[session] == [("failed", "interrupted"), ("done", "success")], by_session[session]
    untouched = set(sessions) - {session for _t, session in lost}
    assert all(by_session[s] == [("done", "success")] for s in untouched), {s: by_session[s] for s in untouched if by_session[s] != [("done", "success")]}

    started = cluster.started_at()
    again = [turn_id for session, turn_id, status, _o, _w, _at in turns if status == "done" and session in {s for _t, s in lost}]
    recovery = max(started[turn_id] - killed_at for turn_id in again)
    print(f"{SESSIONS} sessions, {len(runs)} runs for {len(turns)} turns; a SIGKILLed worker's {len(lost)} turns' agents "
          f"ran again on the other within {recovery:.1f} s of the kill (lease {LEASE_SECONDS} s); test {took:.1f} s")
    assert recovery < LEASE_SECONDS * 3 + 5


def test_fly_and_compose_run_workers_beside_the_replicas() -> None:
    import tomllib

    import yaml

    from bot.settings import load

    fly = tomllib.loads((ROOT / "fly.toml").read_text())
    assert fly["processes"] == {"app": "pacer serve", "worker": "pacer worker"}
    assert {group for vm in fly["vm"] for group in vm["processes"]} == {"app", "worker"}
    assert load(fly["env"], toml_path=None).turn_queue == "procrastinate"

    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())["services"]
    commands = Counter(" ".join(service["command"]) for service in compose.values() if "command" in service)
    assert commands == {"pacer migrate": 1, "pacer serve": 2, "pacer worker": 2}
    for name, service in compose.items():
        if "command" in service:  # every Pacer process: valid settings, one database, one queue
            settings = load({k: str(v) for k, v in service["environment"].items()}, toml_path=None)
            assert (settings.turn_queue, settings.sqlite) == ("procrastinate", False), name


def test_an_archive_halts_a_turn_on_a_worker_and_a_stopping_worker_hands_its_turn_back(database_url: str, tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, database_url)
    engine = dbmod.make_engine(database_url)
    try:
        cluster.serve("serve")
        cluster.worker("worker-a", PACER_DRAIN_SECONDS="1")
        with httpx.Client(timeout=10) as client:
            archived = cluster.new(client, 0, "archived mid-turn sleep=60", "priority")
            handed = cluster.new(client, 0, "handed back sleep=60", "priority")
            assert _until(lambda: len(cluster.runs()) == 2, 20), cluster.logs("worker-a")[-3000:]
            r = client.post(f"http://127.0.0.1:{cluster.ports[0]}/api/v1/sessions/{archived}/archive", headers={"Authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 200, r.text
            asked = time.monotonic()
            halted = lambda: _rows(engine, "SELECT status FROM turns WHERE session_id = :s", s=archived) == [("halted",)]  # noqa: E731
            assert _until(halted, 10), _rows(engine, "SELECT session_id, status, outcome FROM turns")
            print(f"an archive on pacer serve halted the agent on pacer worker in {time.monotonic() - asked:.1f} s")

        cluster.procs["worker-a"].send_signal(signal.SIGTERM)  # past PACER_DRAIN_SECONDS, its turn goes back
        assert cluster.procs["worker-a"].wait(timeout=20) == 0, cluster.logs("worker-a")[-3000:]
        first = _rows(engine, "SELECT status, outcome FROM turns WHERE session_id = :s ORDER BY id", s=handed)
        assert first[0] == ("failed", "interrupted"), first
        cluster.worker("worker-b")
        done = lambda: _rows(engine, "SELECT status FROM sessions WHERE id = :s", s=handed) == [("done",)]  # noqa: E731
        assert _until(done, 20), (_rows(engine, "SELECT id, status, outcome, owner, job_id FROM turns"), cluster.logs("worker-b")[-2000:])
    finally:
        cluster.stop()
    turns = _rows(engine, "SELECT session_id, id, status, outcome FROM turns ORDER BY id")
    engine.dispose()
    assert [(s, st, o) for s, _t, st, o in turns] == [
        (archived, "halted", "halted"), (handed, "failed", "interrupted"), (handed, "done", "success"),
    ], turns
    assert Counter(turn for _s, turn in cluster.runs()) == Counter({turn_id: 1 for _s, turn_id, _st, _o in turns})


def test_a_turn_a_worker_ends_is_told_in_its_slack_thread(database_url: str, tmp_path: Path, mock: MockSlack) -> None:
    """The notices of a turn's end are raised where the turn ran: a worker must post them itself,
    since no `pacer serve` hears them. An @Pacer mention starts a session on `pacer serve`, its turn
    runs on the worker, and the answer reaches the message's thread."""
    secret = "workers-signing-secret"
    slack = {"SLACK_BOT_TOKEN": "xoxb-workers", "SLACK_SIGNING_SECRET": secret, "SLACK_API_URL": mock.api_url,
             "PACER_ROSTER": "UMEM=member"}
    cluster = Cluster(tmp_path, database_url)
    ts = "1790000000.000100"
    try:
        cluster.serve("app", **slack)
        cluster.worker("worker", **slack)
        body = event_body({"type": "app_mention", "channel": "C0WORK", "user": "UMEM", "text": f"<@{BOT_USER_ID}> say hello",
                           "ts": ts}, event_id="Ev0WORKER")
        answer = httpx.post(f"http://127.0.0.1:{cluster.ports[0]}/slack/events", content=body,
                            headers=signed_headers(secret, body, content_type="application/json"), timeout=10)
        assert answer.status_code == 200, answer.text
        try:
            done = mock.wait_for(lambda calls: [c for c in calls if c.method == "chat.postMessage"
                                                and c.body.get("thread_ts") == ts and "is done." in str(c.body.get("text"))], timeout=45)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- app\n{cluster.logs('app')[-3000:]}\n--- worker\n{cluster.logs('worker')[-3000:]}") from None
    finally:
        cluster.stop()
    assert cluster.runs() and "> ok" in str(done[0].body["text"])


# A stand-in for `claude -p --output-format stream-json --verbose`: its first line names its
# conversation (`conv-<session>-<turn>`, or the one it was asked to --resume), then it works for a
# minute, or half a second when it resumes. Its argv goes to the log beside the agent log.
RESUMING_AGENT = """
import json, os, sys, time
session, turn, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
log = os.environ["P12_AGENT_LOG"]
with open(log, "a") as f:
    f.write(f"{session} {turn} {os.getpid()} {time.time()}\\n")
with open(log + ".argv", "a") as f:
    f.write(json.dumps({"turn": int(turn), "argv": rest}) + "\\n")
resumed = rest[1] if rest[:1] == ["--resume"] else None
conversation = resumed or f"conv-{session}-{turn}"
print(json.dumps({"type": "system", "subtype": "init", "session_id": conversation, "tools": ["Bash"]}), flush=True)
time.sleep(0.5 if resumed else 60)
print(json.dumps({"type": "result", "is_error": False, "result": "resumed" if resumed else "fresh", "total_cost_usd": 0.001,
                  "session_id": conversation}))
"""


def test_a_turn_cut_off_with_its_worker_re_runs_with_resume_of_the_conversation_it_began(database_url: str, tmp_path: Path) -> None:
    """A first turn has no agent session id until its agent says one: the worker records it from
    the agent's init line, is killed mid-turn, and the turn recovered on another worker is run
    with `--resume` of that conversation rather than from scratch."""
    cluster = Cluster(tmp_path, database_url)
    cluster.agent.write_text(RESUMING_AGENT)
    engine = dbmod.make_engine(database_url)
    began = time.monotonic()
    try:
        cluster.serve("serve")
        cluster.worker("worker-a")
        with httpx.Client(timeout=10) as client:
            session = cluster.new(client, 0, "a long first turn", "priority")

        def said() -> list[tuple]:
            return _rows(engine, "SELECT s.agent_session_id, t.id, t.status FROM sessions s JOIN turns t ON t.session_id = s.id "
                                 "WHERE s.id = :s AND s.agent_session_id IS NOT NULL", s=session)

        assert _until(lambda: said() != [], 30), (cluster.logs("worker-a")[-3000:], _rows(engine, "SELECT id, status FROM turns"))
        [(conversation, first, status)] = said()
        assert (conversation, status) == (f"conv-{session}-{first}", "running")  # heard mid-turn, before any result
        cluster.procs["worker-a"].send_signal(signal.SIGKILL)
        cluster.procs["worker-a"].wait(timeout=10)
        killed = time.monotonic()
        cluster.worker("worker-b")
        done = lambda: _rows(engine, "SELECT status FROM sessions WHERE id = :s", s=session) == [("done",)]  # noqa: E731
        assert _until(done, 30), (_rows(engine, "SELECT id, status, outcome, owner FROM turns"), cluster.logs("worker-b")[-2000:])
        recovered = time.monotonic() - killed
    finally:
        cluster.stop()
    turns = _rows(engine, "SELECT id, status, outcome, output FROM turns WHERE session_id = :s ORDER BY id", s=session)
    kept = _rows(engine, "SELECT agent_session_id FROM sessions WHERE id = :s", s=session)
    engine.dispose()
    assert [(status, outcome, output) for _id, status, outcome, output in turns] == [
        ("failed", "interrupted", ""), ("done", "success", "resumed"),
    ], turns
    argv = {entry["turn"]: entry["argv"] for entry in map(json.loads, Path(f"{cluster.agent_log}.argv").read_text().splitlines())}
    assert argv == {first: [], turns[1][0]: ["--resume", conversation]}
    assert kept == [(conversation,)]
    print(f"a first turn cut off with its worker re-ran with --resume {conversation} {recovered:.1f} s after the kill "
          f"(lease {LEASE_SECONDS} s); test {time.monotonic() - began:.1f} s")
