"""Benchmark: one queue pass against a long queue on SQLite, at 10,000 and 100,000 waiting sessions.

Each size gets a fresh SQLite file holding that many dormant held sessions (spot work,
precedence and age mixed, a third in concurrency groups) and
the wired scheduler (every admission check). Two figures a size, each the median and the p99 of
`--rounds` passes:

- full: the fleet is full, so a pass reads the head of the queue, asks the first candidate and
  stops. Nothing changes, so every round asks the same question.
- starting: the fleet has room for `--starts` turns; each round's pass starts them, and the
  round's turns are then ended (outside the timing) so the next round finds the room again.

A pass should cost what it starts and reads at the head, not what waits behind it: the two sizes'
figures should be about the same.

    python -m bench.queue_pass [--sizes 10000,100000] [--rounds 30] [--starts 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from datetime import timedelta

from sqlalchemy import insert, update
from sqlmodel import SQLModel

from scheduler.context import Runtime
from scheduler.engine.queue_pass import queue_pass
from scheduler.store import db as dbmod
from scheduler.store.models import Session, Turn
from scheduler.store.policy import ensure_policy
from scheduler.testing import VirtualClock, VirtualDeferrer, VirtualWorkers
from tests.support.harness import T0, SetQuota, context


def seed(engine, waiting: int) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(3)
    rows = []
    for i in range(waiting):
        rows.append(dict(
            title=f"s{i}", genesis=rng.choice(("github_label", "schedule", "api", "github_issue")),
            scheduling_class=None, precedence=rng.randint(-5, 5), status="waiting", runtime="echo",
            created_at=T0 - timedelta(minutes=waiting - i),
            source={}, attachments=[], hold_attachments=[], hold_reason="at_utilization_limit", hold_count=2,
            hold_at=T0, hold_retry_at=T0 + timedelta(hours=1), hold_prompt=f"p{i}", hold_turn_kind="first",
            concurrency_group=f"g{i % 50}" if i % 3 == 0 else None,
        ))
    with dbmod.session_scope(engine) as db:
        for at in range(0, len(rows), 5000):
            db.execute(insert(Session), rows[at:at + 5000])


def end_running(engine) -> None:  # type: ignore[no-untyped-def]
    """Put the round's started sessions back at the end of the queue, held, and end their turns."""
    with dbmod.session_scope(engine) as db:
        db.execute(update(Turn).where(Turn.__table__.c.status == "running").values(status="done"))
        db.execute(update(Session).where(Session.__table__.c.status == "running").values(
            status="waiting", hold_reason="at_utilization_limit", hold_count=2, hold_at=T0, hold_prompt="again",
            hold_turn_kind="first", precedence=-9))


def measure(waiting: int, rounds: int, starts: int) -> tuple[list[float], list[float], int]:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/queue.db"
        engine = dbmod.make_engine(url)
        SQLModel.metadata.create_all(engine)
        seed(engine, waiting)
        clock = VirtualClock(T0)
        deferrer = VirtualDeferrer(clock)
        workers = VirtualWorkers(
            clock, deferrer, duration=lambda _r: timedelta(minutes=20), burn_per_min=lambda _r: 0.1
        )
        runtimes = {"echo": Runtime("echo", True, 0.1)}
        ctx = context(engine, clock, deferrer, workers, wired=True, quota=SetQuota(clock), runtimes=runtimes)
        with dbmod.session_scope(engine) as db:
            ensure_policy(db, {"max_sessions": starts})
        full: list[float] = []
        starting: list[float] = []
        started_total = 0
        for _ in range(50):  # warm: fill the fleet (a pass examines a bounded slice of the queue)
            if not queue_pass(ctx):
                break
        for _ in range(rounds):
            began = time.perf_counter()
            assert queue_pass(ctx) == []
            full.append((time.perf_counter() - began) * 1000)
        for _ in range(rounds):
            end_running(engine)
            began = time.perf_counter()
            started_total += len(queue_pass(ctx))
            starting.append((time.perf_counter() - began) * 1000)
        engine.dispose()
        return full, starting, started_total


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args(argv)
    for size in (int(s) for s in args.sizes.split(",")):
        full, starting, started = measure(size, args.rounds, args.starts)
        print(f"{size:>7} waiting: fleet full {statistics.median(full):6.1f} ms median, {p99(full):6.1f} ms p99 · "
              f"starting {args.starts} {statistics.median(starting):6.1f} ms median, {p99(starting):6.1f} ms p99 "
              f"({started} started over {args.rounds} passes)")


if __name__ == "__main__":
    main()
