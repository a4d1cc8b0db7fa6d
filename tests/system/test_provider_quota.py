"""The provider's word, end to end (P18's acceptance): a real `pacer serve` on SQLite runs a
stand-in `claude` through the real command runner, in the custody that ships. The agent prints a
`rate_limit_event` (five-hour window at 80%, resetting at T) and keeps working; while its turn
still runs, the gate's reading shows 80% and reset T, as Anthropic reports it, on
`/api/v1/policy`, on `/pacer policy` (through `/api/v1/chat`, the handler Slack's command uses)
and on `/metrics`. The delay from the agent's print to the figure on `/api/v1/policy` is printed:
P18 asks for 1 s; the reading is reused for at most half a second (`scheduler.quota_reuse`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from bot.serve.demo import wait_until_up
from tests.support.custody_support import agent_python, custody_settings, make_room, remove_room, require_custody
from tests.support.paths import FIXTURES, ROOT
from tests.system.test_crash import _port

TOKEN = "provider-quota-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def room() -> Iterator[Path]:
    require_custody()
    room = make_room(**{"fake_claude.py": (FIXTURES / "fake_claude.py").read_text()})
    try:
        yield room
    finally:
        remove_room(room)


def _serve(room: Path, port: int) -> subprocess.Popen[bytes]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PACER_")},
        "PYTHONPATH": str(ROOT),
        "PACER_PORT": str(port),
        "PACER_API_TOKEN": TOKEN,
        "PACER_METRICS_TOKEN": "",
        "DATABASE_URL": f"sqlite:///{room}/pacer.db",
        "PACER_RUNNER": "command",
        "PACER_RUNNER_COMMAND": f"{agent_python()} {room / 'bin' / 'fake_claude.py'}",
        "PACER_QUOTA_SOURCE": "agents",
        "PACER_DRAIN_SECONDS": "1",  # the stand-in works on for 20 s; the stop need not wait for it
        "PACER_WORKDIR": str(room / "work"),
        "PACER_WORKSPACES": str(room / "workspaces"),
        **custody_settings(room, "shipped"),
    }
    log = (room / "serve.log").open("ab")
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve"], cwd=room, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    if not wait_until_up(f"http://127.0.0.1:{port}", 30, alive=lambda: proc.poll() is None):
        proc.kill()
        raise AssertionError((room / "serve.log").read_text()[-4000:])
    return proc


def _five_hour(base: str) -> dict[str, object]:
    windows = httpx.get(f"{base}/api/v1/policy", headers=AUTH, timeout=10).json()["gate"]["windows"]
    return next(w for w in windows if w["name"] == "5h")


@pytest.mark.long
def test_the_providers_figure_reaches_every_surface_while_the_turn_runs(room: Path) -> None:
    port = _port()
    base = f"http://127.0.0.1:{port}"
    server = _serve(room, port)
    resets = (datetime.now(UTC) + timedelta(hours=3)).replace(microsecond=0)
    try:
        before = _five_hour(base)
        assert before["measured_by"] is None and before["fallback"], before  # an estimate, said to be one

        prompt = f"fix it [fake:stream][fake:rate=allowed:0.8:{int(resets.timestamp())}:five_hour][fake:slow=20]"
        created = httpx.post(f"{base}/api/v1/sessions", json={"prompt": prompt, "scheduling_class": "priority"},
                             headers=AUTH, timeout=10)
        assert created.status_code == 201, created.text
        calls = list((room / "work").glob("session-*/fake_call.json"))
        deadline = time.monotonic() + 30
        while not calls and time.monotonic() < deadline:
            time.sleep(0.02)
            calls = list((room / "work").glob("session-*/fake_call.json"))
        assert calls, (room / "serve.log").read_text()[-3000:]
        printed = calls[0].stat().st_mtime  # the agent prints its event right after writing this file

        window = _five_hour(base)
        while window["measured_by"] is None and time.monotonic() < deadline:
            time.sleep(0.02)
            window = _five_hour(base)
        shown = time.time()
        assert window["measured_by"] == "anthropic", (window, (room / "serve.log").read_text()[-3000:])
        assert window["unit"] == "fraction" and window["spent"] == pytest.approx(0.8)
        assert window["capacity"] == pytest.approx(1.0)
        assert datetime.fromisoformat(str(window["resets_at"])) == resets

        said = httpx.post(f"{base}/api/v1/chat", json={"text": "policy"}, headers=AUTH, timeout=10).json()["text"]
        assert "as Anthropic (Claude Code) reports it" in said and "80.0% used" in said, said
        metrics = httpx.get(f"{base}/metrics", timeout=10).text
        assert 'pacer_window_measured{by="anthropic",window="5h"} 1.0' in metrics, metrics
        assert 'pacer_window_spent_ratio{window="5h"} 0.8' in metrics
        assert 'pacer_window_spent_usd{window="5h"}' not in metrics  # a fraction has no dollars to show
        running = httpx.get(f"{base}/api/v1/sessions", headers=AUTH, timeout=10).json()
        assert [s["status"] for s in running["sessions"]] == ["running"], json.dumps(running)[:2000]
        print(f"the provider's 80% was on /api/v1/policy {shown - printed:.2f} s after the agent printed it")
    finally:
        server.terminate()
        server.communicate(timeout=30)
