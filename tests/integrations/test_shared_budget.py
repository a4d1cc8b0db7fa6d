"""The hourly budgets of progress edits are one budget for every process on the database
(`scheduler.store.buckets`, `integrations.spacing.StoreBucket`): GitHub's secondary rate limits
count a token's writes, so three workers running turns must not make three times the bound."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from integrations.spacing import Spacing, StoreBucket
from scheduler.store.buckets import take
from tests.support.paths import ROOT

# A process that takes from the bucket as fast as it can, `n` times, and prints how many it got.
TAKER = """
import sys
from scheduler.store import db
from scheduler.store.buckets import take
engine = db.make_engine(sys.argv[1])
sys.stdin.readline()  # all start together
now = float(sys.argv[2])
print(sum(take(engine, "github-progress", per_hour=36, burst=5, now=now + i * 1e-3) == 0.0 for i in range(10)))
"""


def test_a_bucket_gives_its_burst_then_says_when_the_next_call_may_go(any_engine: Engine) -> None:
    # 3,600 an hour is one a second, and a bucket of three.
    got = [take(any_engine, "b", per_hour=3600, burst=3, now=1000.0) for _ in range(4)]
    assert got[:3] == [0.0, 0.0, 0.0] and got[3] == pytest.approx(1.0)
    assert take(any_engine, "b", per_hour=3600, burst=3, now=1000.5) == pytest.approx(0.5)  # nothing taken
    assert take(any_engine, "b", per_hour=3600, burst=3, now=1001.0) == 0.0
    assert take(any_engine, "other", per_hour=3600, burst=3, now=1001.0) == 0.0  # a bucket a name
    # Refilled up to its size and no further, however long it sat.
    assert [take(any_engine, "b", per_hour=3600, burst=3, now=9000.0) for _ in range(4)][3] == pytest.approx(1.0)
    # A clock a step behind another process's takes nothing it has not earned.
    assert take(any_engine, "b", per_hour=3600, burst=3, now=8000.0) == pytest.approx(1.0)


def test_processes_taking_at_once_share_one_budget(any_engine: Engine) -> None:
    url = any_engine.url.render_as_string(hide_password=False)
    now = time.time()
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, "-c", TAKER, url, str(now)], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(3)]
    outs: list[tuple[str, str]] = []
    try:
        time.sleep(1.0)  # each has imported and connected
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outs = [proc.communicate(timeout=60) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    assert all(proc.returncode == 0 for proc in procs), outs
    # A bucket of five shared by three processes asking ten times each: five calls, not fifteen.
    assert sum(int(out) for out, _err in outs) == 5, outs


def test_spacing_over_a_shared_bucket_defers_the_call_it_cannot_take_now(any_engine: Engine) -> None:
    calls: list[int] = []
    # One every 0.1 s, a bucket of two: two go at once, the others when the bucket refills.
    spacing: Spacing[int] = Spacing(0.0, calls.append, name="t", bucket=StoreBucket(any_engine, "t", 36_000, 2))
    started = time.monotonic()
    for key in range(4):
        spacing.ask(key)
    assert calls == [0, 1]
    deadline = time.monotonic() + 10
    while len(calls) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(calls) == [0, 1, 2, 3] and time.monotonic() - started >= 0.15
    spacing.close()


def test_a_database_that_cannot_answer_defers_the_call_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    class Down:
        url = "sqlite:///nowhere"

        def begin(self, *_a: Any, **_k: Any) -> Any:
            raise OperationalError("SELECT 1", {}, Exception("database is locked"))

        connect = begin

    bucket = StoreBucket(Down(), "github-progress", 150, 30)  # type: ignore[arg-type]
    assert bucket.take() == 30.0
    assert "github-progress: the shared hourly budget could not be read (OperationalError)" in caplog.text
