"""Benchmark: turns on worker machines (PACER_TURN_QUEUE=procrastinate) with 1 and 2 workers.

For each worker count, on a fresh PostgreSQL database: one `pacer serve` takes a burst of signed
GitHub `issues.labeled` deliveries (one issue in each of as many repositories) whose trigger makes
each a priority session, and decides every
first turn into procrastinate's queue; then that many `pacer worker` processes (the echo agent,
--concurrency turns each) start and drain it while more deliveries arrive. Prints, per worker
count, how fast the workers started turns (agent starts a second, from each turn's finish less
its duration), how fast `pacer serve` decided them (turn rows a second), and the p50/p99 of the
webhooks answered while the workers drained the queue; then checks that every session ran
exactly one turn. Bounded: each round stops --timeout seconds after its burst, done or not.

    python -m bench.scale [--sessions 150] [--probes 60] [--concurrency 8] [--echo-seconds 0.5] [--timeout 60]

The database server comes from PACER_BENCH_DATABASE_URL (else PACER_TEST_DATABASE_URL): each round
creates a database named after it (`<name>_scale_<n>`) and drops it afterwards.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine, text

from bench.serve import free_port, start_pacer
from bench.webhooks import SECRET, deliveries, percentile, process_cpu_seconds, send_all, senders
from bot.settings_rules import database_url as driver_url
from scheduler import db as dbmod
from scheduler.models import Trigger

READY_SECONDS = 30


@dataclass
class Round:
    workers: int
    sessions: int
    done: int
    turns: int
    starts_per_second: float
    decisions_per_second: float
    p50_ms: float
    p99_ms: float
    drained_seconds: float | None
    worker_cpu_ms: float  # CPU of every worker process, per turn
    serve_cpu_ms: float  # CPU of `pacer serve` from the workers' start, per turn


def _admin_url() -> str:
    url = os.environ.get("PACER_BENCH_DATABASE_URL") or os.environ.get("PACER_TEST_DATABASE_URL")
    if not url:
        raise SystemExit("bench.scale needs PostgreSQL: set PACER_BENCH_DATABASE_URL (or PACER_TEST_DATABASE_URL)")
    return url


def _database(admin: Engine, base: str, name: str, *, drop: bool) -> str:
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        if not drop:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    return base.rsplit("/", 1)[0] + f"/{name}"


def _spawn_worker(workdir: Path, env: dict[str, str], index: int) -> subprocess.Popen[bytes]:
    log_path = workdir / f"worker-{index}.log"
    return subprocess.Popen([sys.executable, "-m", "bot.cli", "worker"], env={**os.environ, **env},
                            stdout=log_path.open("wb"), stderr=subprocess.STDOUT, cwd=str(workdir))


def _registered(engine: Engine, processes: list[subprocess.Popen[bytes]], count: int) -> None:
    """Return once procrastinate has registered `count` workers."""
    deadline = time.monotonic() + READY_SECONDS
    while _count(engine, "SELECT count(*) FROM procrastinate_workers") < count:
        if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
            raise RuntimeError("pacer worker did not start; see its log in the round's workdir")
        time.sleep(0.2)


def _issues(count: int, rng: random.Random, prefix: str) -> list[tuple[str, bytes]]:
    """One delivery per repository: a repository's sessions run one at a time (its concurrency
    group), which would measure the groups rather than the workers."""
    return [deliveries(1, 0, rng, owner=f"{prefix}-{i}")[0] for i in range(count)]


def _count(engine: Engine, sql: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar() or 0)


def run_round(workers: int, args: argparse.Namespace, admin: Engine, base: str) -> Round:
    name = f"{base.rsplit('/', 1)[1].split('?')[0]}_scale_{workers}"
    url = _database(admin, base, name, drop=False)
    workdir = Path(tempfile.mkdtemp(prefix=f"pacer-bench-scale-{workers}-"))
    full = driver_url("DATABASE_URL", url)
    dbmod.migrate(full)
    engine = dbmod.make_engine(full)
    with dbmod.session_scope(engine) as db:
        db.add(Trigger(name="relabel", kind="github_label", config={"label": "pacer"}, scheduling_class="priority",
                       prompt_template="Work on {{ url }}: {{ title }}", created_at=datetime.now(UTC)))
    env = {
        "DATABASE_URL": url, "PACER_TURN_QUEUE": "procrastinate", "PACER_RUNNER": "echo", "PACER_LOG_LEVEL": "WARNING",
        "PACER_ECHO_SECONDS": str(args.echo_seconds), "PACER_ECHO_COST_USD": "0.0001", "GITHUB_WEBHOOK_SECRET": SECRET,
        "PACER_WORKDIR": str(workdir / "work"), "PACER_CONFIG": str(workdir / "pacer.toml"),
    }
    port = free_port()
    processes: list[subprocess.Popen[bytes]] = []
    results: list[tuple[float, int]] = []
    drained = None
    worker_cpu = serve_cpu = 0.0
    try:
        processes.append(start_pacer(workdir, url, port, {**env, "PACER_AGENT_WORKERS": str(args.sessions + args.probes)}))
        clients = senders(f"http://127.0.0.1:{port}", args.senders)
        rng = random.Random(args.seed)
        # The burst is decided before any worker runs, so the round measures the workers, not
        # how fast one `pacer serve` takes deliveries in (bench.webhooks measures that).
        send_all(clients, _issues(args.sessions, rng, "burst"), args.senders)
        began = time.monotonic()
        while _count(engine, "SELECT count(*) FROM turns") < args.sessions and time.monotonic() - began < args.timeout:
            time.sleep(0.25)
        serve_cpu = process_cpu_seconds(processes[0].pid)
        started = [_spawn_worker(workdir, {**env, "PACER_AGENT_WORKERS": str(args.concurrency)}, i) for i in range(workers)]
        processes.extend(started)
        _registered(engine, started, workers)
        worker_cpu = -sum(process_cpu_seconds(p.pid) for p in started)  # less what starting up cost
        # Webhooks answered while the workers drain the queue and report every turn's end.
        results, _wall = send_all(clients, _issues(args.probes, rng, "probe"), args.probe_senders)
        while time.monotonic() - began < args.timeout:
            if _count(engine, "SELECT count(*) FROM sessions WHERE status = 'done'") >= args.sessions + args.probes:
                drained = time.monotonic() - began
                break
            time.sleep(0.25)
        while not clients.empty():
            clients.get().close()
        worker_cpu += sum(process_cpu_seconds(p.pid) for p in started)
        serve_cpu = process_cpu_seconds(processes[0].pid) - serve_cpu
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    with engine.connect() as conn:
        starts = [row[0] for row in conn.execute(text(
            "SELECT extract(epoch FROM finished_at) - duration_ms / 1000.0 FROM turns "
            "WHERE status = 'done' AND duration_ms IS NOT NULL ORDER BY 1"))]
        decided = [row[0] for row in conn.execute(text("SELECT extract(epoch FROM started_at) FROM turns ORDER BY 1"))]
    done = _count(engine, "SELECT count(*) FROM sessions WHERE status = 'done'")
    turns = _count(engine, "SELECT count(*) FROM turns")
    engine.dispose()
    _database(admin, base, name, drop=True)
    latencies = [seconds * 1000 for seconds, _status in results]
    return Round(workers, args.sessions + args.probes, done, turns, _rate(starts), _rate(decided),
                 statistics.median(latencies), percentile(latencies, 99), drained,
                 worker_cpu * 1000 / max(turns, 1), serve_cpu * 1000 / max(turns, 1))


def _rate(instants: list[float]) -> float:
    """Events a second between the first and the last of `instants` (sorted epoch seconds)."""
    span = float(instants[-1] - instants[0]) if len(instants) > 1 else 0.0
    return (len(instants) - 1) / span if span > 0 else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=150)
    parser.add_argument("--concurrency", type=int, default=8, help="turns each worker runs at once")
    parser.add_argument("--echo-seconds", type=float, default=0.5)
    parser.add_argument("--senders", type=int, default=10, help="concurrent webhook senders of the burst")
    parser.add_argument("--probes", type=int, default=60, help="deliveries sent while the workers drain the queue")
    parser.add_argument("--probe-senders", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a round may take after its burst")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    base = _admin_url()
    admin = dbmod.make_engine(driver_url("PACER_BENCH_DATABASE_URL", base))
    rounds = [run_round(workers, args, admin, base) for workers in (1, 2)]
    admin.dispose()
    ceiling = args.concurrency / args.echo_seconds
    print(f"load         {os.getloadavg()[0]:.1f} (1-minute average) on {os.cpu_count()} CPUs: the rates are bounded by free CPU")
    print(f"sessions     {args.sessions} priority sessions from a burst of signed webhooks, decided before the workers start, "
          f"then {args.probes} more sent ({args.probe_senders} senders) while the workers drain the queue; "
          f"echo agent {args.echo_seconds} s a turn, {args.concurrency} turns at once a worker")
    failures = []
    for r in rounds:
        drained = f"all done {r.drained_seconds:.1f} s after the burst" if r.drained_seconds is not None else f"NOT all done within {args.timeout:.0f} s"
        print(f"{r.workers} worker{'s' if r.workers > 1 else ' '}    {r.starts_per_second:5.1f} turn starts/s (ceiling {ceiling * r.workers:.0f}/s; "
              f"turns decided {r.decisions_per_second:.1f}/s)   "
              f"webhook while draining p50 {r.p50_ms:.1f} ms  p99 {r.p99_ms:.1f} ms   {drained}")
        print(f"             CPU a turn: workers {r.worker_cpu_ms:.0f} ms, pacer serve {r.serve_cpu_ms:.0f} ms (from the workers' registration on)")
        if r.done != r.sessions or r.turns != r.sessions:
            failures.append(f"{r.workers} worker(s): {r.done} of {r.sessions} sessions done, {r.turns} turns (expected one each)")
    for failure in failures:
        print(f"FAIL         {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
