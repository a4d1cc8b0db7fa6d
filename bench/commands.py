"""Benchmark: `/pacer queue` and `/pacer holds` against `pacer serve` with 10,000 sessions, over loopback.

A real `pacer serve` (its own process: uvicorn, the Bolt app, the scheduler) on SQLite holding
10,000 sessions (spot and priority, some held, some running), with SLACK_API_URL pointing at the
loopback mock of Slack's Web API. 500 slash commands, signed as Slack signs them and alternating
`queue` and `holds`, are sent by 10 concurrent clients. Each has its own response_url on the mock,
so two latencies are measured per command: to the HTTP ack, and to the answer arriving at the
response_url. Target: p99 ack under 300 ms (Slack gives up at 3 s).

    python -m bench.commands [--requests 500] [--sessions 10000] [--concurrency 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import insert

from bench.serve import free_port, start_pacer
from scheduler.store import db as dbmod
from scheduler.store.models import Session
from tests.support.slack_mock import BOT_TOKEN, SIGNING_SECRET, MockSlack, command_body, signed_headers

TARGET_ACK_P99_MS = 300.0
NOW = datetime.now(UTC)


def seed_sessions(url: str, count: int) -> None:
    """A realistic mix: mostly waiting spot work, some priority, some held, a few running."""
    engine = dbmod.make_engine(url)
    rows: list[dict[str, object]] = []
    for i in range(count):
        held = i % 7 == 0
        rows.append(
            {
                "title": f"bench task {i}",
                "genesis": ("github_label", "slack", "schedule", "api")[i % 4],
                "status": "running" if i % 500 == 0 else "waiting",
                "scheduling_class": "priority" if i % 50 == 0 else None,
                "precedence": i % 10,
                "runtime": "echo",
                "requester": "UMEM",
                "created_at": NOW - timedelta(minutes=count - i),
                "source": {},
                "attachments": [],
                "hold_attachments": [],
                "hold_reason": "spot_budget" if held else None,
                "hold_count": 1 if held else 0,
                "hold_at": NOW if held else None,
                "hold_retry_at": NOW + timedelta(minutes=30) if held else None,
                "hold_sentence": "Spot budget for this window is spent." if held else None,
            }
        )
    with dbmod.session_scope(engine) as db:
        db.execute(insert(Session), rows)
    engine.dispose()


def start_server(workdir: Path, url: str, port: int, api_url: str) -> subprocess.Popen[bytes]:
    return start_pacer(workdir, url, port, {
        "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": api_url,
        "PACER_ROSTER": "UOPS=operator,UMEM=member", "PACER_MAX_SESSIONS": "1",
    })


def send_all(
    base: str, mock: MockSlack, count: int, concurrency: int
) -> tuple[dict[str, tuple[float, float, int]], float]:
    """Send `count` commands; returns {response name: (sent at, ack seconds, status)}, wall seconds."""
    local = threading.local()
    clients: list[httpx.Client] = []

    def post(n: int) -> tuple[str, tuple[float, float, int]]:
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=base, timeout=30)
            clients.append(local.client)
        name = f"bench{n:04d}"
        body = command_body("queue" if n % 2 == 0 else "holds", user="UOPS", response_url=mock.response_url(name))
        headers = signed_headers(SIGNING_SECRET, body)
        sent = time.perf_counter()
        response = local.client.post("/slack/events", content=body.encode(), headers=headers)
        return name, (sent, time.perf_counter() - sent, response.status_code)

    begun = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = dict(pool.map(post, range(count)))
    wall = time.perf_counter() - begun
    for client in clients:
        client.close()
    return results, wall


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="pacer-bench-commands-"))
    url = f"sqlite:///{workdir / 'pacer.db'}"
    dbmod.migrate(url)
    seed_sessions(url, args.sessions)
    mock = MockSlack().start()
    port = free_port()
    server = start_server(workdir, url, port, mock.api_url)
    try:
        results, wall = send_all(f"http://127.0.0.1:{port}", mock, args.requests, args.concurrency)
        answered = mock.wait_for(
            lambda calls: [c for c in calls if c.path.startswith("/response/bench")]
            if sum(c.path.startswith("/response/bench") for c in calls) >= args.requests
            else [],
            timeout=300,
        )
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        mock.stop()

    acks = [ack * 1000 for _sent, ack, _status in results.values()]
    arrivals = {c.path.removeprefix("/response/"): c.at for c in answered}
    answers = [(arrivals[name] - sent) * 1000 for name, (sent, _ack, _status) in results.items() if name in arrivals]
    statuses: dict[int, int] = {}
    for _sent, _ack, status in results.values():
        statuses[status] = statuses.get(status, 0) + 1
    ok_answers = sum(1 for c in answered if not c.body.get("text", "").startswith(":warning:"))
    ack_p99 = percentile(acks, 99)
    print(
        f"requests     {len(results)} (/pacer queue and /pacer holds alternating), concurrency {args.concurrency}, "
        f"{args.sessions} sessions"
    )
    print(f"throughput   {len(results) / wall:.0f} acks/s ({wall:.2f} s)")
    print(
        f"ack          p50 {statistics.median(acks):.1f} ms   p99 {ack_p99:.1f} ms   max {max(acks):.1f} ms   (target "
        f"p99 < {TARGET_ACK_P99_MS:.0f} ms)"
    )
    print(
        f"answer       p50 {statistics.median(answers):.1f} ms   p99 {percentile(answers, 99):.1f} ms   max "
        f"{max(answers):.1f} ms   (at the response_url)"
    )
    print(
        f"statuses     {dict(sorted(statuses.items()))}; {len(answers)} answers posted, {ok_answers} of them not an "
        f"error"
    )
    print(f"workdir      {workdir}")
    failures = []
    if statuses.get(200, 0) != args.requests:
        failures.append(f"expected {args.requests} × 200; got {statuses}")
    if len(answers) != args.requests or ok_answers != args.requests:
        failures.append(f"expected {args.requests} answers, none an error; got {len(answers)}, {ok_answers} fine")
    if ack_p99 >= TARGET_ACK_P99_MS:
        failures.append(f"ack p99 {ack_p99:.1f} ms is over the {TARGET_ACK_P99_MS:.0f} ms target")
    for failure in failures:
        print(f"FAIL         {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
