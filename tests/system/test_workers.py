"""Turns on worker machines (P12), as they run in production: two `pacer serve` replicas decide,
two `pacer worker` processes run every turn through procrastinate on one PostgreSQL database,
and a stand-in agent logs each run it starts, so a turn run twice, or never, shows
(`tests.support.cluster`).

A hundred and twenty sessions, priority and spot, arrive through both replicas; the leading replica is
killed with SIGKILL and the rest arrive through the other, which takes the lead; then one worker
is killed while it runs turns. No attempt runs twice and every session's last runs once (the
agent's log against the turn rows); the dead worker's turns, those it ran and those it had taken
but not yet begun, come back once their leases run out and run again on the other worker; every
session ends done; and every look at the held sessions, with a leader and without, finds
each with exactly one re-check in the shared job store. An archive decided on `pacer serve`
stops the agent on the worker, and a worker stopped with SIGTERM hands a turn that outlasts its
drain back for the next worker.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from scheduler.store import db as dbmod
from tests.support.cluster import (
    LEASE_SECONDS,
    ROOT,
    TOKEN,
    Cluster,
    HeldSample,
    held_sample,
    rows,
    scratch_database,
    until,
)
from tests.support.custody_support import agent_processes
from tests.support.slack_mock import BOT_USER_ID, MockSlack, event_body, signed_headers

SESSIONS = 120  # a third priority, the rest spot: ten times the slots, so spot work is held
BEFORE_KILL = 40  # sent across both replicas; the rest go through the survivor as it takes over
SETTLED_SECONDS = 3.0  # a hold's alarm is armed once its transaction commits: a younger hold is not judged


@pytest.fixture
def database_url() -> Iterator[str]:
    with scratch_database("pacer_workers") as url:
        yield url


@pytest.mark.long
def test_a_killed_leader_and_a_killed_worker_leave_every_attempt_run_once(database_url: str, tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, database_url)
    engine = dbmod.make_engine(database_url)
    phase = ["led"]  # then "leaderless" from the leader's kill, and "taken over" once the standby leads
    samples: list[tuple[str, HeldSample]] = []
    watching = threading.Event()

    failures: list[str] = []  # a look that raised: a dead watcher must not pass for "nothing held"

    def watch_holds() -> None:
        while not watching.wait(0.3):
            try:
                samples.append((phase[0], held_sample(engine, SETTLED_SECONDS)))
            except Exception as error:  # noqa: BLE001 - reported by the assertion below
                failures.append(f"{phase[0]}: {error!r}")

    watcher = threading.Thread(target=watch_holds, daemon=True)
    began = time.monotonic()
    try:
        cluster.serve("serve-a")
        cluster.serve("serve-b")
        cluster.worker("worker-a")
        cluster.worker("worker-b")
        leader = cluster.leader(engine)
        assert leader in cluster.urls, leader
        survivor = next(name for name in cluster.urls if name != leader)
        victim = cluster.procs["worker-a"].pid
        watcher.start()
        with httpx.Client(timeout=10) as client:
            def send(i: int, serve: str) -> int:
                return cluster.new(
                    client, serve, f"work {i} sleep={0.5 + (i % 4) * 0.1}", "priority" if i % 3 == 0 else "spot"
                )

            # Sent eight at a time, so arrivals outrun the fleet (12 slots, turns of 0.5-0.8 s) and spot
            # sessions are held: one at a time, a fast agent kept up with the posts and nothing was held.
            with ThreadPoolExecutor(8) as posting:
                sessions = list(posting.map(lambda i: send(i, ("serve-a", "serve-b")[i % 2]), range(BEFORE_KILL)))
            assert until(lambda: len(cluster.runs()) >= 12, 20), cluster.logs("worker-a")[-3000:]
            cluster.procs[leader].send_signal(signal.SIGKILL)
            cluster.procs[leader].wait(timeout=10)
            phase[0] = "leaderless"
            killed_leader_at = time.monotonic()
            with ThreadPoolExecutor(8) as posting:
                sessions += list(posting.map(lambda i: send(i, survivor), range(BEFORE_KILL, SESSIONS)))
        # The standby takes the lock within its retry interval (ten seconds) of the leader's end.
        assert until(lambda: cluster.leader(engine) == survivor, 15), (
            cluster.leader(engine),
            cluster.logs(survivor)[-3000:],
        )
        takeover = time.monotonic() - killed_leader_at
        phase[0] = "taken over"

        def victims_running() -> list[tuple]:
            # The turns it claimed, and those whose job it had taken but not yet claimed.
            return rows(
                engine,
                "SELECT t.id, t.session_id, t.owner FROM turns t LEFT JOIN procrastinate_jobs j ON j.id = t.job_id "
                "WHERE t.status = 'running' AND (t.owner LIKE :o OR (t.owner IS NULL AND j.status = 'doing' AND "
                "j.worker_id IN "
                "(SELECT j.worker_id FROM turns t JOIN procrastinate_jobs j ON j.id = t.job_id WHERE t.owner LIKE "
                ":o)))",
                o=f"%:{victim}:%",
            )

        def victims_agents() -> set[int]:
            return {turn for turn, _s, owner in victims_running() if owner is not None} & {
                turn for _s, turn in cluster.runs()
            }

        # Three agents at once on the victim makes the kill cut several short; on a loaded machine
        # its jobs may run one or two at a time, and one cut short still shows the recovery.
        assert until(lambda: len(victims_agents()) >= 3, 20) or until(lambda: len(victims_agents()) >= 1, 20), (
            cluster.logs("worker-a")[-3000:]
        )
        cluster.procs["worker-a"].send_signal(signal.SIGKILL)
        killed_worker_at = time.time()
        cluster.procs["worker-a"].wait(timeout=10)
        lost = [(turn, session) for turn, session, _owner in victims_running()]  # what the kill interrupted

        def all_done() -> bool:
            return rows(engine, "SELECT count(*) FROM sessions WHERE status = 'done'")[0][0] == SESSIONS

        # Bounded by the work left on the one worker that survives, plus a lease and a sweep; far
        # short of a held session's first re-check (ten minutes), so none waited for its alarm.
        assert until(all_done, 90), (
            rows(engine, "SELECT id, status, hold_reason FROM sessions WHERE status <> 'done'"),
            rows(engine, "SELECT id, session_id, status, outcome, owner, job_id FROM turns WHERE status = 'running'"),
            rows(
                engine,
                "SELECT id, status, worker_id, abort_requested FROM procrastinate_jobs WHERE status IN ('todo', "
                "'doing')",
            ),
            cluster.logs(survivor)[-2000:],
            cluster.logs("worker-b")[-2000:],
        )
        took = time.monotonic() - began
    finally:
        watching.set()
        if watcher.is_alive():
            watcher.join(5)
        cluster.stop()

    runs = cluster.runs()
    turns = rows(engine, "SELECT session_id, id, status, outcome, owner, started_at FROM turns ORDER BY id")
    engine.dispose()
    counted = Counter(turn for _s, turn in runs)
    assert [turn for turn, count in counted.items() if count > 1] == []  # no attempt ran twice
    claimed = {turn_id for _s, turn_id, _st, _o, owner, _at in turns if owner is not None}
    assert set(counted) <= claimed  # nothing ran that no worker claimed
    done = [(session, turn_id) for session, turn_id, status, _o, _w, _at in turns if status == "done"]
    assert len(done) == SESSIONS and all(
        counted[turn_id] == 1 for _s, turn_id in done
    )  # each session's last attempt ran, once
    by_session: dict[int, list[tuple[str, str | None]]] = {}
    for session, _turn, status, outcome, _owner, _at in turns:
        by_session.setdefault(session, []).append((status, outcome))
    assert lost, "the kill interrupted nothing: this run shows no recovery"
    for _turn_id, session in lost:  # taken from the dead worker (its agent started or not yet), run once more
        assert by_session[session] == [("failed", "interrupted"), ("done", "success")], by_session[session]
    untouched = set(sessions) - {session for _t, session in lost}
    assert all(by_session[s] == [("done", "success")] for s in untouched), {
        s: by_session[s] for s in untouched if by_session[s] != [("done", "success")]
    }

    # Every held session had exactly one re-check, due when its hold says, in every look taken.
    assert [sample.wrong for _phase, sample in samples if sample.wrong] == []
    held = {
        name: {s for seen, sample in samples if seen == name for s in sample.held}
        for name in ("led", "leaderless", "taken over")
    }
    looks = Counter(seen for seen, _sample in samples)
    assert held["leaderless"] | held["taken over"], (
        f"no session was held after the leader's kill: the re-check count shows nothing ({dict(looks)} looks, "
        f"{ {name: len(ids) for name, ids in held.items()} } held, {len(failures)} failed looks: {failures[:3]})")

    started = cluster.started_at()
    again = [
        turn_id
        for session, turn_id, status, _o, _w, _at in turns
        if status == "done" and session in {s for _t, s in lost}
    ]
    recovery = max(started[turn_id] - killed_worker_at for turn_id in again)
    cut = sum(counted[turn_id] for turn_id, _s in lost)
    assert cut > 0, "the kill cut no agent short: this run shows no turn lost mid-run"
    print(
        f"{SESSIONS} sessions, {len(runs)} runs for {len(turns)} turns; {len(samples)} looks saw held sessions, each "
        f"with "
        f"one re-check: {', '.join(f'{len(ids)} {name}' for name, ids in held.items())}; the standby led "
        f"{takeover:.1f} s "
        f"after the kill; a SIGKILLed worker's {len(lost)} turns ({cut} with their agent started) ran again on the "
        f"other within {recovery:.1f} s "
        f"of its kill (lease {LEASE_SECONDS} s); test {took:.1f} s"
    )
    assert recovery < LEASE_SECONDS * 3 + 5


def test_fly_and_compose_run_workers_beside_the_replicas() -> None:
    import tomllib

    import yaml

    from bot.config.settings import load

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


@pytest.mark.long
def test_an_archive_halts_a_turn_on_a_worker_and_a_stopping_worker_hands_its_turn_back(
    database_url: str, tmp_path: Path
) -> None:
    cluster = Cluster(tmp_path, database_url)
    engine = dbmod.make_engine(database_url)
    try:
        cluster.serve("serve")
        cluster.worker("worker-a", PACER_DRAIN_SECONDS="1")
        with httpx.Client(timeout=10) as client:
            archived = cluster.new(client, "serve", "archived mid-turn sleep=60", "priority")
            handed = cluster.new(client, "serve", "handed back sleep=60", "priority")
            assert until(lambda: len(cluster.runs()) == 2, 20), cluster.logs("worker-a")[-3000:]
            r = client.post(
                f"{cluster.urls['serve']}/api/v1/sessions/{archived}/archive",
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert r.status_code == 200, r.text
            asked = time.monotonic()
            halted = lambda: rows(engine, "SELECT status FROM turns WHERE session_id = :s", s=archived) == [("halted",)]  # noqa: E731
            assert until(halted, 10), rows(engine, "SELECT session_id, status, outcome FROM turns")
            print(f"an archive on pacer serve halted the agent on pacer worker in {time.monotonic() - asked:.1f} s")

        cluster.procs["worker-a"].send_signal(signal.SIGTERM)  # past PACER_DRAIN_SECONDS, its turn goes back
        assert cluster.procs["worker-a"].wait(timeout=20) == 0, cluster.logs("worker-a")[-3000:]
        first = rows(engine, "SELECT status, outcome FROM turns WHERE session_id = :s ORDER BY id", s=handed)
        assert first[0] == ("failed", "interrupted"), first
        cluster.worker("worker-b")
        done = lambda: rows(engine, "SELECT status FROM sessions WHERE id = :s", s=handed) == [("done",)]  # noqa: E731
        assert until(done, 20), (
            rows(engine, "SELECT id, status, outcome, owner, job_id FROM turns"),
            cluster.logs("worker-b")[-2000:],
        )
    finally:
        cluster.stop()
    turns = rows(engine, "SELECT session_id, id, status, outcome FROM turns ORDER BY id")
    engine.dispose()
    assert [(s, st, o) for s, _t, st, o in turns] == [
        (archived, "halted", "halted"), (handed, "failed", "interrupted"), (handed, "done", "success"),
    ], turns
    assert Counter(turn for _s, turn in cluster.runs()) == Counter({turn_id: 1 for _s, turn_id, _st, _o in turns})


@pytest.mark.long
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
        body = event_body(
            {
                "type": "app_mention",
                "channel": "C0WORK",
                "user": "UMEM",
                "text": f"<@{BOT_USER_ID}> say hello",
                "ts": ts,
            },
            event_id="Ev0WORKER",
        )
        answer = httpx.post(f"{cluster.urls['app']}/slack/events", content=body,
                            headers=signed_headers(secret, body, content_type="application/json"), timeout=10)
        assert answer.status_code == 200, answer.text
        try:
            done = mock.wait_for(
                lambda calls: [
                    c
                    for c in calls
                    if c.method == "chat.postMessage"
                    and c.body.get("thread_ts") == ts
                    and "is done." in str(c.body.get("text"))
                ],
                timeout=45,
            )
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}\n--- app\n{cluster.logs('app')[-3000:]}\n--- worker\n{cluster.logs('worker')[-3000:]}"
            ) from None
    finally:
        cluster.stop()
    assert cluster.runs() and "> ok" in str(done[0].body["text"])


# A stand-in for `claude -p --output-format stream-json --verbose`: its first line names its
# conversation (`conv-<session>-<turn>`, or the one it was asked to --resume), then it works for a
# minute, or half a second when it resumes. Its argv goes to the log beside its runs log.
RESUMING_AGENT = """
import json, os, sys, time
session, turn, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
log = "runs.log"
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


@pytest.mark.long
def test_a_turn_cut_off_with_its_worker_re_runs_with_resume_of_the_conversation_it_began(
    database_url: str, tmp_path: Path
) -> None:
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
            session = cluster.new(client, "serve", "a long first turn", "priority")

        def said() -> list[tuple]:
            return rows(
                engine,
                "SELECT s.agent_session_id, t.id, t.status FROM sessions s JOIN turns t ON t.session_id = s.id "
                "WHERE s.id = :s AND s.agent_session_id IS NOT NULL",
                s=session,
            )

        assert until(lambda: said() != [], 30), (
            cluster.logs("worker-a")[-3000:],
            rows(engine, "SELECT id, status FROM turns"),
        )
        [(conversation, first, status)] = said()
        assert (conversation, status) == (f"conv-{session}-{first}", "running")  # heard mid-turn, before any result
        cluster.procs["worker-a"].send_signal(signal.SIGKILL)
        cluster.procs["worker-a"].wait(timeout=10)
        killed = time.monotonic()
        # Its agent died with it (the leash), rather than finishing the attempt unsupervised.
        assert until(lambda: not agent_processes(cluster.agent), 6), agent_processes(cluster.agent)
        cluster.worker("worker-b")
        done = lambda: rows(engine, "SELECT status FROM sessions WHERE id = :s", s=session) == [("done",)]  # noqa: E731
        assert until(done, 30), (
            rows(engine, "SELECT id, status, outcome, owner FROM turns"),
            cluster.logs("worker-b")[-2000:],
        )
        recovered = time.monotonic() - killed
    finally:
        cluster.stop()
    turns = rows(engine, "SELECT id, status, outcome, output FROM turns WHERE session_id = :s ORDER BY id", s=session)
    kept = rows(engine, "SELECT agent_session_id FROM sessions WHERE id = :s", s=session)
    engine.dispose()
    assert [(status, outcome, output) for _id, status, outcome, output in turns] == [
        ("failed", "interrupted", ""), ("done", "success", "resumed"),
    ], turns
    logged = (cluster.room / "work" / f"session-{session}" / "runs.log.argv").read_text().splitlines()
    argv = {entry["turn"]: entry["argv"] for entry in map(json.loads, logged)}
    assert argv == {first: [], turns[1][0]: ["--resume", conversation]}
    assert kept == [(conversation,)]
    print(f"a first turn cut off with its worker re-ran with --resume {conversation} {recovered:.1f} s after the kill "
          f"(lease {LEASE_SECONDS} s); test {time.monotonic() - began:.1f} s")
