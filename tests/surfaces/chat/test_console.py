"""`pacer console` beside a running `pacer serve`: the server leads the scheduler, so the
console's lines go to it over POST /api/v1/chat and are answered by the same chat handler."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

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
