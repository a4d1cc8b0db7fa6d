"""Benchmark: the start-time forecast for 1,000 waiting sessions (issue 32, P20 item 4's
"a forecast for 1,000 waiting sessions in <= 1 s of CPU").

Prints the CPU seconds of the pure forecast (`scheduler.rules.forecast`: DRAWS runs forward of
the whole queue) over a fleet of ten running turns, both quota windows, follow-ups and priority
arrivals: the median and the worst of `--repeat` runs.

    python -m bench.forecast [--waiting 1000] [--running 10] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

from scheduler.rules.forecast import DRAWS, Arrivals, Outlook, Work, forecast
from scheduler.rules.snapshot import PolicyView, WindowState

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def outlook(waiting: int, running: int) -> Outlook:
    rng = random.Random(1)
    policy = PolicyView(True, 20.0, 20.0, 10, True, {})
    windows = (
        WindowState("5h", timedelta(hours=5), NOW + timedelta(hours=2), 300.0, 150.0, True, NOW),
        WindowState("7d", timedelta(days=7), NOW + timedelta(days=3), 12000.0, 5000.0, True, NOW),
    )

    def work(i: int, **kw: object) -> Work:
        created = (NOW - timedelta(minutes=i)).timestamp()
        return Work(i, (1, 0, created, i), True, True, 0.25, "claude_code", **kw)  # type: ignore[arg-type]

    fleet = tuple(work(i, started_at=NOW - timedelta(minutes=rng.uniform(0, 40))) for i in range(1, running + 1))
    queue = tuple(work(i) for i in range(running + 1, running + waiting + 1))
    return Outlook(
        policy, 12, windows, fleet, queue,
        turn_minutes={"claude_code": tuple(rng.uniform(15, 60) for _ in range(200))},
        follow_up={"claude_code": 0.3},
        arrivals=Arrivals(tuple(0.2 for _ in range(168)), "claude_code", 0.25),
        learned=True, demand_usd_per_hour=tuple(10.0 for _ in range(168)),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiting", type=int, default=1000)
    parser.add_argument("--running", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    state = outlook(args.waiting, args.running)
    cpu: list[float] = []
    found = {}
    for k in range(args.repeat):
        began = time.process_time()
        found = forecast(state, NOW, seed=k)
        cpu.append(time.process_time() - began)
    last = max(found.values(), key=lambda f: f.median, default=None)
    print(f"forecast: {args.waiting} waiting, {args.running} running, {DRAWS} draws: "
          f"CPU median {statistics.median(cpu):.3f} s, worst {max(cpu):.3f} s over {args.repeat} runs; "
          f"{len(found)} forecast, the last expected at {last.median:%Y-%m-%d %H:%M} UTC" if last else "")


if __name__ == "__main__":
    main()
