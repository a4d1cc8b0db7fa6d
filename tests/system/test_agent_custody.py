"""The agent in custody, on a real `pacer serve` holding real secrets in its environment: a hostile
agent (tests/support/fixtures/agents/hostile_agent.py), run through the command runner in its session's
repository, tries every way to Pacer's secrets and privileges the P16 probe found — the parent's
/proc/<pid>/environ, Pacer's database and triggers file, another session's working tree, hooks and
configuration planted where Pacer's git would run them — and reports what it got. Nothing of
Pacer's reaches it, the planted programs never run, and the next session's push is clean.

Modes: "shipped" is what the image runs (the agent user when the tests run as root, as CI does,
and the bubblewrap sandbox where it works); "user" is the agent user alone; "none" (neither, only
possible when Pacer is not root) shows what an unconfined agent still reaches."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from bot.serve.demo import wait_until_up
from tests.integrations.test_workspaces import bare_remote, git
from tests.support.custody_support import agent_python, agent_user, custody_settings, sandbox_usable
from tests.support.paths import ROOT
from tests.support.slack_mock import MockSlack
from tests.system.test_crash import _port

SECRETS = {
    "GITHUB_TOKEN": "ghp_custodyTEST0123456789abcdefSECRET",
    "SLACK_BOT_TOKEN": "xoxb-custody-test-SECRET-0123456789",
    "SLACK_SIGNING_SECRET": "custody-signing-SECRET-abcdef0123",
    "PACER_API_TOKEN": "custody-api-SECRET-0123456789",
    "GITHUB_WEBHOOK_SECRET": "custody-webhook-SECRET-0123456789",
}
TRIGGER_MARK = "trigger-file-SECRET-mark"


def _modes() -> list[str]:
    modes = ["shipped"]
    if os.geteuid() == 0:
        modes.append("user")
    else:
        modes.append("none")
    return modes


def _serve(room: Path, port: int, mode: str, slack: MockSlack) -> subprocess.Popen[str]:
    state = room / "pacer"  # Pacer's own files: what an agent must not read
    state.mkdir(exist_ok=True)
    (state / "triggers.toml").write_text(f'# {TRIGGER_MARK}\n')
    (state / "triggers.toml").chmod(0o600)  # as start-up tells an operator to, when agents run as their own user
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PACER_", "GITHUB_", "SLACK_"))},
        **SECRETS,
        "SLACK_API_URL": slack.api_url,
        "PYTHONPATH": str(ROOT),
        "PACER_PORT": str(port),
        "DATABASE_URL": f"sqlite:///{state}/pacer.db",
        "PACER_TRIGGERS_FILE": str(state / "triggers.toml"),
        "PACER_ROSTER": "U0SECRET=operator",
        "PACER_RUNNER": "command",
        "PACER_RUNNER_COMMAND": f"{agent_python()} {room / 'bin' / 'hostile_agent.py'}",
        "PACER_WORKDIR": str(room / "agents" / "work"),
        "PACER_WORKSPACES": str(room / "agents" / "workspaces"),
        "PACER_GIT_REMOTE": f"file://{room}/remotes/{{repository}}.git",
        "PACER_MAX_SESSIONS": "1",
        "PACER_LOG_LEVEL": "INFO",
        **custody_settings(room, "shipped" if mode == "shipped" else "none"),
    }
    if mode == "user":
        env["PACER_AGENT_SANDBOX"] = "off"
        env["PACER_AGENT_USER"] = str(agent_user())
        env.pop("PACER_AGENT_HOME", None)
    log = open(room / "serve.log", "a")  # noqa: SIM115 - the server's whole life
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve"], cwd=state, env=env, stdout=log, stderr=subprocess.STDOUT, text=True
    )
    if not wait_until_up(f"http://127.0.0.1:{port}", 30, alive=lambda: proc.poll() is None):
        proc.kill()
        raise AssertionError((room / "serve.log").read_text())
    return proc


def _run(api: str, body: dict[str, object], db: Path) -> tuple[int, str]:
    r = httpx.post(
        f"{api}/sessions", json=body, headers={"Authorization": f"Bearer {SECRETS['PACER_API_TOKEN']}"}, timeout=10
    )
    assert r.status_code == 201, r.text
    sid = r.json()["session"]["id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT status, output, error FROM turns WHERE session_id = ? ORDER BY id DESC", (sid,)
            ).fetchall()
        if rows and rows[0][0] not in ("running", "queued"):
            assert rows[0][0] == "done", rows[0]
            return sid, rows[0][1]
        time.sleep(0.2)
    raise AssertionError(f"session {sid} did not finish")


@pytest.mark.long
@pytest.mark.parametrize("mode", _modes())
def test_a_hostile_agent_reaches_none_of_pacers_secrets_and_plants_nothing(room: Path, mode: str) -> None:
    if mode == "shipped" and agent_user() is None and not sandbox_usable():
        pytest.skip("neither the agent user (root) nor bubblewrap is available: 'none' covers this machine")
    bare = bare_remote(room) / "acme" / "api.git"
    marker = room / f"hook-ran-{uuid.uuid4().hex}"
    port = _port()
    api = f"http://127.0.0.1:{port}/api/v1"
    db = room / "pacer" / "pacer.db"
    slack = MockSlack().start()
    server = _serve(room, port, mode, slack)
    mirror = room / "agents" / "workspaces" / "mirrors" / "acme" / "api.git"
    try:
        benign = json.dumps({"benign": True, "marker": str(marker), "mirror": str(mirror), "remote": "", "files": []})
        first, _ = _run(api, {"prompt": benign, "repository": "acme/api", "scheduling_class": "priority"}, db)
        other = room / "agents" / "workspaces" / "sessions" / f"session-{first}"
        told = {
            "marker": str(marker),
            "mirror": str(mirror),
            "remote": f"file://{room}/remotes/acme/api.git",
            "files": [
                str(db),
                f"{db}-wal",
                str(room / "pacer" / "triggers.toml"),
                str(other / "CHANGES.md"),
                str(mirror / "config"),
            ],
        }
        hostile, output = _run(
            api, {"prompt": json.dumps(told), "repository": "acme/api", "scheduling_class": "priority"}, db
        )
        mirror_config = (mirror / "config").read_text()
        third, _ = _run(api, {"prompt": benign, "repository": "acme/api", "scheduling_class": "priority"}, db)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        slack.stop()
    report = json.loads(output)
    everything = json.dumps(report["read"])
    for name, secret in SECRETS.items():
        assert secret not in everything, f"{mode}: the agent read {name}"
    assert "DATABASE_URL" not in everything and "PACER_ROSTER" not in everything and "U0SECRET" not in everything
    assert not marker.exists(), f"{mode}: a planted program ran with Pacer's privileges: {marker.read_text()[:300]}"
    # Every session's branch reached the real remote, not the one the agent's configuration named.
    pushed = git("--git-dir", str(bare), "for-each-ref", "--format=%(refname:short)", "refs/heads/pacer/").split()
    assert [b.split("-")[0] for b in pushed] == [f"pacer/{first}", f"pacer/{hostile}", f"pacer/{third}"]
    assert "Hostile turn" in git("--git-dir", str(bare), "log", "--format=%s", pushed[1])
    assert "insteadOf" not in mirror_config and "hooksPath" not in mirror_config
    if mode == "none":
        # What an unconfined agent still reaches: Pacer's files and other sessions' work.
        assert str(db) in report["read"] and "SQLite format 3" in report["read"][str(db)]
        assert TRIGGER_MARK in everything
        return
    refused = "\n".join(report["refused"])
    for path in (str(db), str(room / "pacer" / "triggers.toml"), str(other / "CHANGES.md"), str(mirror / "config")):
        assert path not in report["read"], f"{mode}: the agent read {path}"
        assert f"read {path}" in refused
    assert not (mirror / "hooks" / "pre-push").exists()
    if "sandbox" in _custody_mode(room):
        assert len(report["processes"]) <= 5, report["processes"]  # its own PID namespace: the leash's tree alone


def _custody_mode(room: Path) -> str:
    for line in (room / "serve.log").read_text().splitlines():
        if "Agents run" in line:
            return line
    return ""
