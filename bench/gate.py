"""Benchmark: the gate decision with 10,000 waiting and 100 running sessions on SQLite.

Prints the median and p99 of (a) reading the quota ledger + building the snapshot from the
database + the decision, and (b) the pure decision alone. Targets: (a) < 20 ms, (b) < 1 ms.

    python -m bench.gate [--waiting 10000] [--running 100] [--history 20000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert

from integrations.quota.ledger import LedgerSource
from scheduler.context import Context, Limits, Ports, Runtime
from scheduler.engine.fleet import asking_for, build_snapshot, read_quota
from scheduler.quota_reuse import ReusedQuotaSource
from scheduler.rules.gate import evaluate
from scheduler.store import db as dbmod
from scheduler.store.models import Session, Turn
from scheduler.store.policy import ensure_policy, load_policy
from scheduler.testing import VirtualClock, VirtualDeferrer, VirtualWorkers

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def seed(engine, waiting: int, running: int, history: int) -> int:
    rng = random.Random(1)
    geneses = ["github_label", "github_issue", "schedule", "api"]  # the waiting sessions are spot
    fleet_geneses = ["github_label", "schedule", "command", "slack"]  # the fleet mixes both classes
    with dbmod.session_scope(engine) as db:
        ensure_policy(db, {"max_sessions": 150})
        db.execute(
            insert(Session),
            [
                dict(
                    title=f"s{i}",
                    genesis=rng.choice(geneses),
                    precedence=rng.randint(-50, 50),
                    status="waiting",
                    runtime="echo",
                    created_at=NOW - timedelta(minutes=i),
                    source={},
                    attachments=[],
                    hold_attachments=[],
                    hold_reason="at_utilization_limit",
                    hold_count=1,
                    hold_at=NOW,
                    hold_retry_at=NOW + timedelta(minutes=10),
                )
                for i in range(waiting)
            ],
        )
        db.execute(insert(Session), [
            dict(title=f"r{i}", genesis=rng.choice(fleet_geneses), status="running", runtime="echo",
                 created_at=NOW - timedelta(hours=1), source={}, attachments=[], hold_attachments=[])
            for i in range(running)
        ])
        first_running = waiting + 1
        db.execute(insert(Turn), [
            dict(session_id=first_running + i, prompt="p", status="running", runtime="echo", attachments=[],
                 created_at=NOW - timedelta(minutes=5), started_at=NOW - timedelta(minutes=rng.randint(1, 50)))
            for i in range(running)
        ])
        db.execute(insert(Turn), [
            dict(session_id=rng.randint(1, waiting), prompt="p", status="done", runtime="echo", attachments=[],
                 cost_usd=rng.uniform(0.01, 2.0), duration_ms=rng.randint(10_000, 900_000),
                 created_at=NOW - timedelta(hours=rng.uniform(0, 160)),
                 started_at=NOW - timedelta(hours=rng.uniform(0, 160)),
                 finished_at=NOW - timedelta(hours=rng.uniform(0, 160)))
            for i in range(history)
        ])
    return 1


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--running", type=int, default=100)
    parser.add_argument("--history", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        dbmod.migrate(url)
        engine = dbmod.make_engine(url)
        seed(engine, args.waiting, args.running, args.history)
        clock = VirtualClock(NOW)
        deferrer = VirtualDeferrer(clock)
        ledger = LedgerSource(engine, capacity_5h_usd=500.0, capacity_7d_usd=6000.0,
                              anchor=datetime(2026, 1, 5, tzinfo=UTC), fallbacks={"echo": 1.5})
        ctx = Context(
            ports=Ports(
                engine=engine, clock=clock, deferrer=deferrer, workers=VirtualWorkers(clock, deferrer), quota=ledger
            ),
            limits=Limits(agent_workers=150, runtimes={"echo": Runtime("echo", True, 1.5)}),
        )

        cold = measure(ctx, engine, ledger, args, ttl=0)
        warm = measure(ctx, engine, ledger, args, ttl=5.0)
        snapshot, asking, decision = cold[1], cold[2], cold[3]

        pure: list[float] = []
        for _ in range(args.rounds * 20):
            started = time.perf_counter()
            evaluate(snapshot, asking, NOW)
            pure.append((time.perf_counter() - started) * 1000)

        print(f"gate benchmark: {args.waiting} waiting, {args.running} running, {args.history} finished turns (SQLite)")
        print(f"  decision: {decision.reason} ({len(snapshot.fleet)} turns in the fleet)")
        for label, (samples, *_rest) in (
            ("every decision reads the ledger", cold),
            ("reading reused for 5 s (production)", warm),
        ):
            print(
                f"  quota read + snapshot from DB + decision, {label}: "
                f"median {statistics.median(samples):.2f} ms, p99 {pct(samples, 0.99):.2f} ms  (target < 20 ms)"
            )
        print(
            f"  pure decision alone: median {statistics.median(pure) * 1000:.1f} us, p99 {pct(pure, 0.99) * 1000:.1f} "
            f"us  (target < 1 ms)"
        )


def measure(ctx, engine, ledger, args, *, ttl):  # type: ignore[no-untyped-def]
    ctx.ports.quota = ReusedQuotaSource(ledger, ttl_seconds=ttl)
    full: list[float] = []
    decision = snapshot = asking = None
    for i in range(args.rounds):
        started = time.perf_counter()
        reading = read_quota(ctx, NOW)
        with dbmod.session_scope(engine) as db:
            policy = load_policy(db)
            session = db.get(Session, 1 + (i * 37) % args.waiting)
            snapshot = build_snapshot(db, ctx, policy, reading)
            asking = asking_for(session, ctx, policy, running=False)
            decision = evaluate(snapshot, asking, NOW)
        full.append((time.perf_counter() - started) * 1000)
    return full, snapshot, asking, decision


if __name__ == "__main__":
    main()
