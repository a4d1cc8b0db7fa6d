"""Known failures say what is wrong and what to do in one line, not a traceback: each run as a
person meets it, `pacer` in a process of its own, and its output counted line by line."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.support.github_support import SECRET, headers, issue_payload
from tests.support.paths import ROOT

UNREACHABLE = "postgresql://pacer:hunter2@127.0.0.1:9/pacer"  # the discard port: nothing listens


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PACER_", "SLACK_", "GITHUB_")) and k != "DATABASE_URL"
    }
    return env | {"PYTHONPATH": str(ROOT), **extra}


def _pacer(cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], cwd=cwd, env=_env(**extra),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_an_unreachable_database_stops_serve_with_one_line(tmp_path: Path, log_format: str) -> None:
    run = _pacer(tmp_path, "serve", DATABASE_URL=UNREACHABLE, PACER_LOG_FORMAT=log_format, PACER_PORT=str(_free_port()))
    lines = (run.stdout + run.stderr).splitlines()
    assert run.returncode == 1 and len(lines) == 1, lines
    line = json.loads(lines[0])["message"] if log_format == "json" else lines[0]
    assert "127.0.0.1:9" in line and "Connection refused" in line and "DATABASE_URL" in line
    assert "hunter2" not in line and "***" in line


def test_simulate_from_db_without_a_database_says_so_in_one_line_and_creates_nothing(tmp_path: Path) -> None:
    run = _pacer(tmp_path, "simulate", "--from-db")
    lines = (run.stdout + run.stderr).splitlines()
    assert run.returncode == 2 and len(lines) == 1, lines
    assert "no database at sqlite:///./var/pacer.db" in lines[0] and "DATABASE_URL" in lines[0]
    assert list(tmp_path.iterdir()) == []  # no ./var/pacer.db made empty on the way


def test_simulate_from_db_on_an_unreachable_or_foreign_database_says_so_in_one_line(tmp_path: Path) -> None:
    unreachable = _pacer(tmp_path, "simulate", "--from-db", DATABASE_URL=UNREACHABLE)
    lines = (unreachable.stdout + unreachable.stderr).splitlines()
    assert (
        unreachable.returncode == 2
        and len(lines) == 1
        and "Connection refused" in lines[0]
        and "hunter2" not in lines[0]
    ), lines
    (tmp_path / "other.db").touch()
    foreign = _pacer(tmp_path, "simulate", "--from-db", DATABASE_URL="sqlite:///other.db")
    lines = (foreign.stdout + foreign.stderr).splitlines()
    assert foreign.returncode == 2 and len(lines) == 1 and "no Pacer tables" in lines[0], lines


class RefusingGithub:
    """GitHub's REST API refusing every call as an installation without Issues: write does."""

    def __init__(self) -> None:
        self.calls = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                return None

            def do_GET(self) -> None:
                outer.calls += 1
                data = json.dumps({"message": "Resource not accessible by integration"}).encode()
                self.send_response(403)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_PATCH = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def github() -> Iterator[RefusingGithub]:
    fake = RefusingGithub()
    yield fake
    fake.stop()


def test_every_failed_status_comment_is_one_warning_line_naming_what_to_do(
    tmp_path: Path, github: RefusingGithub
) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = _env(
        DATABASE_URL=f"sqlite:///{tmp_path}/pacer.db",
        PACER_PORT=str(port),
        PACER_API_TOKEN="t0ken-0123456789abcdef",
        PACER_API_ROLE="operator",  # the automation sets up the trigger
        GITHUB_WEBHOOK_SECRET=SECRET,
        GITHUB_TOKEN="ghp_refused",
        GITHUB_API_URL=github.url,
        PACER_GITHUB_WRITE_SECONDS="0",
        PACER_ECHO_SECONDS="1",
    )
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        trigger = {
            "name": "label",
            "kind": "github_label",
            "config": {"label": "pacer"},
            "prompt_template": "{{ title }}",
        }
        auth = {"Authorization": "Bearer t0ken-0123456789abcdef"}
        assert httpx.post(f"{url}/api/v1/triggers", json=trigger, headers=auth, timeout=30).status_code == 201
        body = json.dumps(issue_payload("labeled", number=7, label="pacer", labels=("pacer",))).encode()
        assert (
            httpx.post(f"{url}/github/webhook", content=body, headers=headers("issues", body), timeout=30).status_code
            == 202
        )
        deadline = time.monotonic() + 60
        while github.calls < 2 and time.monotonic() < deadline:  # the comment for "started", then for "done"
            time.sleep(0.2)
        time.sleep(1)  # the last refusal's line
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    lines = out.splitlines()
    failed = [line for line in lines if "status comment of session" in line]
    assert github.calls >= 2 and len(failed) == github.calls, out
    assert all(" WARNING pacer.github [" in line and "session=1" in line and "403" in line and "write access" in line
               for line in failed), out
    assert "Traceback" not in out
