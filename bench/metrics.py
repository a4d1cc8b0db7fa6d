"""Benchmark: what one `/metrics` scrape costs with a big queue behind it.

Fills a fresh SQLite database (or DATABASE_URL's, which it empties first only when it is
SQLite) with SESSIONS sessions — most waiting on a hold, some running, the rest done — and
TURNS_PER_SESSION finished turns each, then times the scrape's database read and rendering
(`generate_latest` over the DatabaseCollector) and prints p50/p90/max. Every gauge is a
GROUP BY over `sessions` or `turns`, so the cost grows with the rows; a scrape every 15-30 s
should stay a small fraction of one core.

    python -m bench.metrics [--sessions 10000] [--turns-per-session 2] [--scrapes 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import insert

from bot.config.settings import load
from bot.observe.metrics_collector import DatabaseCollector
from bot.runtime.process import build
from scheduler.store.models import Session, Turn

HOLDS = ("at_utilization_limit", "fleet_at_cap", "operator_hold", "concurrency_group", None)


class _Inert:
    """No alarms, no turns: the benchmark only reads."""

    def schedule(self, *a: Any) -> None: ...
    def cancel(self, *a: Any) -> bool: return False
    def next_run(self, *a: Any) -> None: return None
    def submit(self, *a: Any) -> None: raise RuntimeError("the benchmark runs no turns")
    def halt(self, *a: Any) -> bool: return False


def fill(engine: Any, sessions: int, turns_per_session: int, rng: random.Random) -> None:
    now = datetime.now(UTC)
    rows, turns = [], []
    for n in range(1, sessions + 1):
        status = rng.choices(["waiting", "running", "done"], weights=[80, 2, 18])[0]
        hold = rng.choice(HOLDS) if status == "waiting" else None
        rows.append(
            {
                "id": n,
                "title": f"s{n}",
                "genesis": rng.choice(["api", "github_label", "slack", "schedule"]),
                "status": status,
                "precedence": rng.randint(0, 100),
                "hold_reason": hold,
                "hold_count": 1 if hold else 0,
                "created_at": now - timedelta(minutes=n),
                "runtime": "echo",
                "source": {},
                "attachments": [],
                "hold_attachments": [],
                "preemption_count": rng.randint(0, 1),
            }
        )
        for _ in range(turns_per_session):
            turns.append({"session_id": n, "status": "done", "outcome": rng.choice(["success", "success", "failed"]),
                          "duration_ms": rng.randint(1_000, 3_600_000), "created_at": now, "finished_at": now,
                          "runtime": "echo", "attachments": []})
    with engine.begin() as conn:
        conn.execute(insert(Session.__table__), rows)  # type: ignore[attr-defined]
        conn.execute(insert(Turn.__table__), turns)  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns-per-session", type=int, default=2)
    parser.add_argument("--scrapes", type=int, default=20)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="pacer-bench-metrics-")
    settings = load({"DATABASE_URL": f"sqlite:///{folder}/pacer.db"})
    pacer = build(settings, deferrer=_Inert(), workers=_Inert(), migrate=True)
    fill(pacer.engine, args.sessions, args.turns_per_session, random.Random(7))
    registry = CollectorRegistry()
    registry.register(DatabaseCollector(pacer.engine, pacer.ctx))
    size = len(generate_latest(registry))  # the first read warms the caches a server would have warm
    took = []
    for _ in range(args.scrapes):
        started = time.perf_counter()
        generate_latest(registry)
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    print(
        f"{args.sessions} sessions, {args.sessions * args.turns_per_session} turns, {args.scrapes} scrapes of {size} "
        f"bytes: "
        f"p50 {statistics.median(took):.1f} ms, p90 {took[int(len(took) * 0.9) - 1]:.1f} ms, max {took[-1]:.1f} ms"
    )


if __name__ == "__main__":
    main()
