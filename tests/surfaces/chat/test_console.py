"""`pacer console` beside a running `pacer serve`: the server leads the scheduler, so the
console's lines go to it over POST /api/v1/chat and are answered by the same chat handler."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.paths import ROOT
from tests.system.test_crash import TOKEN, _port, _serve


def test_console_speaks_to_the_leading_server(tmp_path: Path) -> None:
    port = _port()
    server = _serve(tmp_path, port, echo_seconds="0.1", PACER_ROSTER="console=operator")
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PACER_PORT": str(port), "PACER_API_TOKEN": TOKEN,
               "DATABASE_URL": f"sqlite:///{tmp_path}/pacer.db", "PACER_ROSTER": "console=operator"}
        out = subprocess.run(
            [sys.executable, "-m", "bot.cli", "console"],
            input="new write the changelog\nqueue all\nquit\n",
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert "your commands go to it at" in out.stdout
        assert "Created #1 write the changelog" in out.stdout
        sessions = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/sessions", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        ).json()
        assert [s["genesis"] for s in sessions["sessions"]] == ["command"]
        no_token = subprocess.run([sys.executable, "-m", "bot.cli", "console"], input="queue\n", cwd=tmp_path,
                                  env={**env, "PACER_API_TOKEN": ""}, capture_output=True, text=True, timeout=60)
        assert no_token.returncode == 2 and "set PACER_API_TOKEN" in no_token.stdout
    finally:
        server.terminate()
        server.communicate(timeout=20)


def _console(tmp: Path, port: int, lines: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PACER_PORT": str(port), "PACER_API_TOKEN": TOKEN,
           "DATABASE_URL": f"sqlite:///{tmp}/pacer.db", **extra}
    return subprocess.run([sys.executable, "-m", "bot.cli", "console"], input=lines, cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.long
def test_the_banner_names_the_role_the_server_applies_not_the_consoles_own(tmp_path: Path) -> None:
    """The console's own PACER_API_ROLE and PACER_ROSTER say operator; the server's say member.
    The banner says what the server will do, and the server does it."""
    port = _port()
    server = _serve(tmp_path, port, echo_seconds="0.1", PACER_API_TOKENS="alice=alice-token-0123456789",
                    PACER_ROSTER="alice=operator")
    try:
        shared = _console(tmp_path, port, "policy set gating=off\nqueue\nquit\n",
                          PACER_API_ROLE="operator", PACER_ROSTER="console=operator")
        assert shared.returncode == 0, shared.stderr
        banner = shared.stdout.splitlines()[0]
        assert banner == "Pacer console as api token (member). Type help, or quit.", shared.stdout
        assert "`policy set` needs the operator role; you are a member" in shared.stdout
        assert "Queue: 0 waiting in all" in shared.stdout
        assert shared.stderr == ""  # the leader's "standing by" line went to var/console.log
        alice = _console(tmp_path, port, "policy set gating=off\nquit\n", PACER_API_TOKEN="alice-token-0123456789")
        assert alice.stdout.startswith("Pacer console as alice (operator)."), alice.stdout
        assert "Policy changed: gating_enabled on → off." in alice.stdout
        assert "your own token" in alice.stdout.splitlines()[1]
        me = httpx.get(f"http://127.0.0.1:{port}/api/v1/me", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        assert me.json() == {"name": "api token", "role": "member", "person": False}
        wrong = _console(tmp_path, port, "queue\n", PACER_API_TOKEN="not-the-token")
        assert wrong.returncode == 2 and "refused this console (the bearer token is not valid)" in wrong.stdout
    finally:
        server.terminate()
        server.communicate(timeout=20)


def test_log_lines_go_to_a_file_not_between_the_answers(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATABASE_URL": f"sqlite:///{tmp_path}/pacer.db",
           "PACER_ROSTER": "console=operator", "PACER_ECHO_SECONDS": "0.1", "PACER_LOG_LEVEL": "INFO"}
    out = subprocess.run([sys.executable, "-m", "bot.cli", "console"], input="new tidy the README\nquit\n",
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].endswith(f"Log lines go to {os.path.join('var', 'console.log')}.")
    assert "Created #1 tidy the README" in out.stdout
    assert " INFO " not in out.stdout + out.stderr and " WARNING " not in out.stdout + out.stderr
    assert "session #1 started" in (tmp_path / "var" / "console.log").read_text()


def _read_until(fd: int, wanted: str, seen: list[str], times: int = 1, seconds: float = 30) -> str:
    """Read the terminal until `wanted` has appeared `times` times in all it has shown."""
    deadline = time.monotonic() + seconds
    while "".join(seen).count(wanted) < times and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen.append(os.read(fd, 4096).decode(errors="replace"))
            except OSError:  # the console closed the terminal
                break
    text = "".join(seen)
    assert text.count(wanted) >= times, text
    return text


def test_at_a_terminal_it_prompts_edits_lines_completes_and_keeps_history(tmp_path: Path) -> None:
    """In a real pseudo-terminal: a prompt, Tab completes a command's name, the up arrow brings
    back the last line, and the history is there for the next run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATABASE_URL": f"sqlite:///{tmp_path}/pacer.db",
           "HOME": str(tmp_path), "TERM": "xterm", "INPUTRC": "/dev/null"}
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "console"], cwd=tmp_path, env=env,
                            stdin=follower, stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    seen: list[str] = []
    try:
        _read_until(leader, "pacer> ", seen)
        os.write(leader, b"que\t\r")  # Tab: `queue `
        _read_until(leader, "Queue: 0 waiting in all", seen)
        os.write(leader, b"\x1b[A\r")  # the up arrow: `queue ` again
        _read_until(leader, "Queue: 0 waiting in all", seen, times=2)
        _read_until(leader, "pacer> ", seen, times=3)
        os.write(leader, b"quit\r")
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    assert [line.strip() for line in (tmp_path / ".pacer_history").read_text().splitlines()][-2:] == ["queue", "quit"]


def test_chat_endpoint_refuses_bad_input_with_a_clear_body(tmp_path: Path) -> None:
    port = _port()
    server = _serve(tmp_path, port, echo_seconds="0.1")
    try:
        api = f"http://127.0.0.1:{port}/api/v1/chat"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.post(api, json={"text": "queue"}, timeout=10).status_code == 401
        empty = httpx.post(api, json={"text": ""}, headers=auth, timeout=10)
        assert empty.status_code == 422 and empty.json()["field"] == "text"
        wrong = httpx.post(api, json={"text": "promote soon"}, headers=auth, timeout=10)
        assert (
            wrong.status_code == 200 and wrong.json()["ok"] is False and "usage: promote <id>" in wrong.json()["text"]
        )
    finally:
        server.terminate()
        server.communicate(timeout=20)
