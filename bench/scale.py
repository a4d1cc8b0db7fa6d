"""Benchmark: turns on worker machines (PACER_TURN_QUEUE=procrastinate), 1 and 2 `pacer serve`
replicas by 1 and 2 `pacer worker` processes.

For each (replicas, workers) pair, on a fresh PostgreSQL database: that many `pacer serve`
processes on their own loopback ports (the first leads by the advisory lock, the other stands by)
take a burst of signed GitHub `issues.labeled` deliveries, sent round robin across them as a load
balancer would (one issue in each of as many repositories), whose trigger makes each a priority
session, and decide every first turn into procrastinate's queue; then that many `pacer worker`
processes (the echo agent, --concurrency turns each) start and drain it while more deliveries
arrive, round robin too. Prints one row per pair: how fast the workers started turns (agent starts
a second, from each turn's finish less its duration), how fast the replicas decided them (turn
rows a second), the p50/p99 of the webhooks answered while the workers drained the queue, and CPU
a turn; then checks that every session ran exactly one turn. Bounded: each round stops --timeout
seconds after its burst, done or not, and stops every process it started.

    python -m bench.scale [--replicas 1,2] [--workers 1,2] [--sessions 150] [--probes 60]
                          [--concurrency 8] [--echo-seconds 0.5] [--timeout 60]

The database server comes from PACER_BENCH_DATABASE_URL (else PACER_TEST_DATABASE_URL): each round
creates a database named after it (`<name>_scale_<replicas>r<workers>w`) and drops it afterwards.
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
from bot.config.rules import database_url as driver_url
from bot.runtime.leader import leader_address
from scheduler.store import db as dbmod
from scheduler.store.models import Trigger

READY_SECONDS = 30
STOP_SECONDS = 30


@dataclass
class Round:
    replicas: int
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
    serve_cpu_ms: float  # CPU of every `pacer serve` from the workers' start, per turn


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


def _start_replicas(workdir: Path, url: str, engine: Engine, env: dict[str, str], count: int,
                    processes: list[subprocess.Popen[bytes]]) -> list[str]:
    """Start `count` `pacer serve` processes one after another, each added to `processes` once it
    answers; return their base URLs once the first leads (so any other stands by)."""
    bases = []
    for index in range(count):
        port = free_port()
        processes.append(start_pacer(workdir, url, port, env, log_name=f"serve-{index}.log"))
        bases.append(f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + READY_SECONDS
    while leader_address(engine) != bases[0]:
        if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
            raise RuntimeError(f"the first pacer serve did not lead; see the serve logs in {workdir}")
        time.sleep(0.2)
    return bases


def _registered(engine: Engine, processes: list[subprocess.Popen[bytes]], count: int) -> None:
    """Return once procrastinate has registered `count` workers."""
    deadline = time.monotonic() + READY_SECONDS
    while _count(engine, "SELECT count(*) FROM procrastinate_workers") < count:
        if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
            raise RuntimeError("pacer worker did not start; see its log in the round's workdir")
        time.sleep(0.2)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every process, then SIGKILL whatever is still running STOP_SECONDS later."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + STOP_SECONDS
    for process in processes:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _issues(count: int, rng: random.Random, prefix: str) -> list[tuple[str, bytes]]:
    """One delivery per repository: a repository's sessions run one at a time (its concurrency
    group), which would measure the groups rather than the workers."""
    return [deliveries(1, 0, rng, owner=f"{prefix}-{i}")[0] for i in range(count)]


def _count(engine: Engine, sql: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar() or 0)


def run_round(replicas: int, workers: int, args: argparse.Namespace, admin: Engine, base: str) -> Round:
    label = f"{replicas}r{workers}w"
    name = f"{base.rsplit('/', 1)[1].split('?')[0]}_scale_{label}"
    url = _database(admin, base, name, drop=False)
    workdir = Path(tempfile.mkdtemp(prefix=f"pacer-bench-scale-{label}-"))
    full = driver_url("DATABASE_URL", url)
    engine = dbmod.make_engine(full)
    try:
        dbmod.migrate(full)
        with dbmod.session_scope(engine) as db:
            db.add(Trigger(name="relabel", kind="github_label", config={"label": "pacer"}, scheduling_class="priority",
                           prompt_template="Work on {{ url }}: {{ title }}", created_at=datetime.now(UTC)))
        return _measure(replicas, workers, args, engine, url, workdir)
    finally:
        engine.dispose()
        _database(admin, base, name, drop=True)


def _measure(replicas: int, workers: int, args: argparse.Namespace, engine: Engine, url: str, workdir: Path) -> Round:
    env = {
        "DATABASE_URL": url, "PACER_TURN_QUEUE": "procrastinate", "PACER_RUNNER": "echo", "PACER_LOG_LEVEL": "WARNING",
        "PACER_ECHO_SECONDS": str(args.echo_seconds), "PACER_ECHO_COST_USD": "0.0001", "GITHUB_WEBHOOK_SECRET": SECRET,
        "PACER_WORKDIR": str(workdir / "work"), "PACER_CONFIG": str(workdir / "pacer.toml"),
        "PACER_DRAIN_SECONDS": "2",  # stopping comes after the measurement: no turn needs to finish
    }
    processes: list[subprocess.Popen[bytes]] = []
    results: list[tuple[float, int]] = []
    drained = None
    try:
        bases = _start_replicas(
            workdir, url, engine, {**env, "PACER_AGENT_WORKERS": str(args.sessions + args.probes)}, replicas, processes
        )
        serving = list(processes)
        clients = senders(bases[0], args.senders)
        rng = random.Random(args.seed)
        # The burst is decided before any worker runs, so the round measures the workers, not
        # how fast `pacer serve` takes deliveries in (bench.webhooks measures that).
        send_all(clients, _issues(args.sessions, rng, "burst"), args.senders, bases=bases)
        began = time.monotonic()
        while _count(engine, "SELECT count(*) FROM turns") < args.sessions and time.monotonic() - began < args.timeout:
            time.sleep(0.25)
        serve_cpu = -sum(process_cpu_seconds(p.pid) for p in serving)
        started = [
            _spawn_worker(workdir, {**env, "PACER_AGENT_WORKERS": str(args.concurrency)}, i) for i in range(workers)
        ]
        processes.extend(started)
        _registered(engine, started, workers)
        worker_cpu = -sum(process_cpu_seconds(p.pid) for p in started)  # less what starting up cost
        # Webhooks answered while the workers drain the queue and report every turn's end.
        results, _wall = send_all(clients, _issues(args.probes, rng, "probe"), args.probe_senders, bases=bases)
        while time.monotonic() - began < args.timeout:
            if _count(engine, "SELECT count(*) FROM sessions WHERE status = 'done'") >= args.sessions + args.probes:
                drained = time.monotonic() - began
                break
            time.sleep(0.25)
        while not clients.empty():
            clients.get().close()
        worker_cpu += sum(process_cpu_seconds(p.pid) for p in started)
        serve_cpu += sum(process_cpu_seconds(p.pid) for p in serving)
    finally:
        _stop(processes)
    with engine.connect() as conn:
        starts = [row[0] for row in conn.execute(text(
            "SELECT extract(epoch FROM finished_at) - duration_ms / 1000.0 FROM turns "
            "WHERE status = 'done' AND duration_ms IS NOT NULL ORDER BY 1"))]
        decided = [row[0] for row in conn.execute(text("SELECT extract(epoch FROM started_at) FROM turns ORDER BY 1"))]
    done = _count(engine, "SELECT count(*) FROM sessions WHERE status = 'done'")
    turns = _count(engine, "SELECT count(*) FROM turns")
    latencies = [seconds * 1000 for seconds, _status in results]
    return Round(replicas, workers, args.sessions + args.probes, done, turns, _rate(starts), _rate(decided),
                 statistics.median(latencies), percentile(latencies, 99), drained,
                 worker_cpu * 1000 / max(turns, 1), serve_cpu * 1000 / max(turns, 1))


def _rate(instants: list[float]) -> float:
    """Events a second between the first and the last of `instants` (sorted epoch seconds)."""
    span = float(instants[-1] - instants[0]) if len(instants) > 1 else 0.0
    return (len(instants) - 1) / span if span > 0 else 0.0


def _counts(value: str) -> list[int]:
    """A comma-separated list of whole numbers of at least 1, such as "1,2"."""
    try:
        counts = [int(part) for part in value.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(
            f"expected whole numbers of at least 1 separated by commas, such as 1,2; got {value!r}"
        )
    return counts


def _table(rounds: list[Round], args: argparse.Namespace) -> list[str]:
    """One row per round, then what the columns mean."""
    lines = [
        f"{'replicas':>8} {'workers':>7} {'starts/s':>8} {'ceiling':>7} {'decided/s':>9} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'worker CPU':>10} {'serve CPU':>9}  drained"
    ]
    for r in rounds:
        drained = f"{r.drained_seconds:.1f} s" if r.drained_seconds is not None else f"NOT within {args.timeout:.0f} s"
        ceiling = args.concurrency / args.echo_seconds * r.workers
        lines.append(
            f"{r.replicas:>8} {r.workers:>7} {r.starts_per_second:>8.1f} {ceiling:>7.0f} "
            f"{r.decisions_per_second:>9.1f} "
            f"{r.p50_ms:>7.1f} {r.p99_ms:>7.1f} {r.worker_cpu_ms:>7.0f} ms {r.serve_cpu_ms:>6.0f} ms  {drained}"
        )
    lines += [
        "",
        "starts/s     turn starts a second on the workers (agent starts, from each turn's finish less its duration)",
        "ceiling      workers × turns at once a worker / echo seconds a turn",
        "decided/s    turn rows a second the replicas wrote, the burst's and the probes'",
        f"p50, p99     response time of the {args.probes} webhooks sent while the workers drained the queue",
        "CPU          a turn: of every worker, and of every pacer serve from the workers' registration on",
        "drained      when every session was done, from the end of the burst",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--replicas", type=_counts, default=[1, 2], help="`pacer serve` processes of each round, such as 1,2"
    )
    parser.add_argument(
        "--workers", type=_counts, default=[1, 2], help="`pacer worker` processes of each round, such as 1,2"
    )
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
    try:
        rounds = [
            run_round(replicas, workers, args, admin, base) for replicas in args.replicas for workers in args.workers
        ]
    finally:
        admin.dispose()
    print(
        f"load         {os.getloadavg()[0]:.1f} (1-minute average) on {os.cpu_count()} CPUs: the rates are bounded by "
        f"free CPU"
    )
    print(
        f"sessions     {args.sessions} priority sessions from a burst of signed webhooks, decided before the workers "
        f"start,\n"
        f"             then {args.probes} more sent ({args.probe_senders} senders) while the workers drain the queue"
    )
    print("webhooks     round robin across the replicas; the first replica leads the scheduler, any other stands by")
    print(f"agent        echo, {args.echo_seconds} s a turn, {args.concurrency} turns at once a worker")
    print()
    for line in _table(rounds, args):
        print(line)
    failures = [
        f"{r.replicas} replica(s) × {r.workers} worker(s): {r.done} of {r.sessions} sessions done, {r.turns} turns "
        f"(expected one each)"
        for r in rounds
        if r.done != r.sessions or r.turns != r.sessions
    ]
    for failure in failures:
        print(f"FAIL         {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
