"""Settings on pydantic-settings and what `pacer serve` checks before it starts: where each value
came from, settings that are valid alone but do not work together (Slack's, the agent on PATH,
SQLite on Fly), the console finding the server's real port, and the drain on SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import select

from bot.config import checks as settings_checks
from bot.config.settings import load
from bot.runtime import process
from bot.runtime.drain import drain
from bot.runtime.leader import LOCK_KEY, Leadership, leader_address
from bot.serve.app import create_app
from scheduler.clock import SystemClock
from scheduler.engine.turns import submit_turn
from scheduler.errors import ConfigError
from scheduler.store import db as dbmod
from scheduler.store.models import Session, Turn
from scheduler.store.sessions import NewSession, create_session
from scheduler.testing import VirtualDeferrer
from tests.support.harness import T0
from tests.support.paths import ROOT
from tests.support.slack_mock import BOT_TOKEN, MockSlack


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PACER_", "SLACK_", "GITHUB_", "FLY_")) and k != "DATABASE_URL"
    }
    return {**env, "PYTHONPATH": str(ROOT), "DATABASE_URL": f"sqlite:///{tmp}/pacer.db", **extra}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- where a value came from ----------------------------------------------------------------------


def test_each_value_names_where_it_came_from(tmp_path: Path) -> None:
    cfg = tmp_path / "pacer.toml"
    cfg.write_text('[settings]\npacer_max_sessions = 4\npacer_port = 9000\n[roster]\nU1 = "operator"\n')
    s = load({"PACER_PORT": "9100", "PACER_ROSTER": "U2=member"}, toml_path=cfg)
    assert (s.port, s.max_sessions, s.host) == (9100, 4, "127.0.0.1")
    assert (
        s.origin("PACER_PORT") == "env"
        and s.origin("PACER_MAX_SESSIONS") == str(cfg)
        and s.origin("PACER_HOST") == "default"
    )
    assert s.origin("PACER_ROSTER") == f"env + {cfg}"


def test_replaced_validates_the_new_value_and_keeps_the_rest() -> None:
    s = load({"PACER_ROSTER": "U2=member", "SLACK_BOT_TOKEN": "xoxb-1"}, toml_path=None)
    moved = s.replaced(DATABASE_URL="postgres://u:p@db/pacer")
    assert moved.database_url == "postgresql+psycopg://u:p@db/pacer" and moved.roster == {"U2": "member"}
    assert moved.slack_bot_token == "xoxb-1" and moved.origin("DATABASE_URL") == "env"
    with pytest.raises(ConfigError, match="^PACER_PORT='0': must be a whole number >= 1$"):
        s.replaced(PACER_PORT="0")


def test_a_toml_value_of_the_wrong_shape_is_named(tmp_path: Path) -> None:
    cfg = tmp_path / "pacer.toml"
    cfg.write_text("[settings]\npacer_gating = [1, 2]\n")
    with pytest.raises(ConfigError, match=r"^PACER_GATING='\[1, 2\]': must be one of true/false"):
        load({}, toml_path=cfg)


def test_pacer_config_says_where_each_value_came_from(tmp_path: Path) -> None:
    (tmp_path / "pacer.toml").write_text("[settings]\npacer_max_sessions = 4\n")
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "config"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(tmp_path, PACER_PORT="9100", SLACK_SIGNING_SECRET="shh-secret"),
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    meaning = {lines[i].split()[0]: lines[i + 1] for i in range(0, len(lines) - 1, 2)}
    assert meaning["PACER_PORT"].endswith("from the environment)")
    assert meaning["PACER_MAX_SESSIONS"].endswith("from pacer.toml)")
    assert meaning["PACER_HOST"].endswith("from the default)")
    assert "shh-secret" not in done.stdout


# --- start-up checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"SLACK_BOT_TOKEN": "xoxb-1"},
            "SLACK_BOT_TOKEN is set: SLACK_SIGNING_SECRET must be set too (HTTP mode verifies every request Slack "
            "sends with it), "
            "or set SLACK_APP_TOKEN to use Socket Mode, which needs no signing secret",
        ),
        (
            {"SLACK_SIGNING_SECRET": "shh"},
            "SLACK_SIGNING_SECRET is set: SLACK_BOT_TOKEN must be set too (Pacer answers in Slack with it)",
        ),
        (
            {"SLACK_APP_TOKEN": "xapp-1", "SLACK_SIGNING_SECRET": "shh"},
            "SLACK_SIGNING_SECRET and SLACK_APP_TOKEN are set: SLACK_BOT_TOKEN must be set too (Pacer answers in "
            "Slack with it)",
        ),
    ],
)
def test_partial_slack_settings_say_what_is_missing(env: dict[str, str], message: str) -> None:
    assert settings_checks.problems(load(env, toml_path=None), {}) == [message]


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "shh"},
        {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"},
    ],
)
def test_complete_slack_settings_or_none_pass(env: dict[str, str]) -> None:
    assert settings_checks.problems(load(env, toml_path=None), {}) == []


def test_the_command_runner_needs_its_agent_on_path(tmp_path: Path) -> None:
    command = load({"PACER_RUNNER": "command", "PACER_RUNNER_COMMAND": "no-such-agent -p {prompt}"}, toml_path=None)
    assert settings_checks.problems(command, {"PATH": "/usr/bin:/bin"}) == [
        "PACER_RUNNER=command: the agent 'no-such-agent' (first word of PACER_RUNNER_COMMAND) is not on PATH "
        "(PATH=/usr/bin:/bin); "
        "install it, give its full path, or set PACER_RUNNER=echo"
    ]
    agent = tmp_path / "bin" / "no-such-agent"
    agent.parent.mkdir()
    agent.write_text("#!/bin/sh\necho '{}'\n")
    agent.chmod(0o755)
    assert settings_checks.problems(command, {"PATH": f"/usr/bin:{agent.parent}"}) == []
    by_path = load({"PACER_RUNNER": "command", "PACER_RUNNER_COMMAND": f"{agent} -p {{prompt}}"}, toml_path=None)
    assert settings_checks.problems(by_path, {"PATH": ""}) == []
    gone = load({"PACER_RUNNER": "command", "PACER_RUNNER_COMMAND": f"{tmp_path}/gone -p {{prompt}}"}, toml_path=None)
    assert settings_checks.problems(gone, {"PATH": ""})[0].startswith(
        f"PACER_RUNNER=command: the agent '{tmp_path}/gone'"
    )
    # The echo runner needs nothing on PATH.
    assert settings_checks.problems(load({}, toml_path=None), {"PATH": ""}) == []


def test_fly_with_sqlite_is_refused_and_with_postgres_is_not() -> None:
    on_fly = {"FLY_APP_NAME": "pacer"}
    assert settings_checks.problems(load({}, toml_path=None), on_fly)[0].startswith(
        "DATABASE_URL='sqlite:///./var/pacer.db': on Fly (FLY_APP_NAME='pacer') a SQLite file lives on a disk the "
        "next deploy wipes"
    )
    assert settings_checks.problems(load({"DATABASE_URL": "postgres://u:p@db/pacer"}, toml_path=None), on_fly) == []
    assert settings_checks.problems(load({}, toml_path=None), {}) == []


def test_pacer_migrate_on_fly_without_postgres_fails_the_release(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "migrate"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(tmp_path, FLY_APP_NAME="pacer"),
    )
    assert done.returncode == 2 and done.stderr.startswith("pacer: configuration error: DATABASE_URL='sqlite:///"), (
        done.stderr
    )
    assert not (tmp_path / "pacer.db").exists()  # nothing was migrated on the release machine's disk


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        ({"FLY_APP_NAME": "pacer"}, "pacer: configuration error: DATABASE_URL='sqlite:///"),
        (
            {"PACER_RUNNER": "command", "PACER_RUNNER_COMMAND": "no-such-agent {prompt}"},
            "pacer: configuration error: PACER_RUNNER=command: the agent 'no-such-agent'",
        ),
        (
            {"SLACK_BOT_TOKEN": "xoxb-1"},
            "pacer: configuration error: SLACK_BOT_TOKEN is set: SLACK_SIGNING_SECRET must be set too",
        ),
    ],
)
def test_pacer_serve_stops_on_one_line(tmp_path: Path, extra: dict[str, str], line: str) -> None:
    done = subprocess.run([sys.executable, "-m", "bot.cli", "serve", "--port", str(_free_port())], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env=_env(tmp_path, **extra))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith(line), done.stderr


# --- Slack: Socket Mode without a signing secret, and no warning from Bolt ---------------------------


def test_socket_mode_needs_no_signing_secret_and_bolt_does_not_warn(tmp_path: Path, monkeypatch, caplog) -> None:
    # Bolt reads SLACK_BOT_TOKEN from the environment by itself, as a deployed Pacer has it.
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    mock = MockSlack().start()
    try:
        settings = load(
            {
                "DATABASE_URL": f"sqlite:///{tmp_path}/p.db",
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "SLACK_APP_TOKEN": "xapp-1",
                "SLACK_API_URL": mock.api_url,
            },
            toml_path=None,
        )
        pacer = process.build(settings, deferrer=VirtualDeferrer(SystemClock()))
        with caplog.at_level(logging.WARNING):
            app = create_app(pacer, start_scheduler=False)
        surface = app.state.slack
        assert surface.socket is not None  # Socket Mode is wired
        assert "/slack/events" not in {
            getattr(route, "path", "") for route in app.routes
        }  # and nothing unsigned reaches Bolt
        assert mock.calls_to("auth.test"), "the bot token was checked at start"
        assert [r.getMessage() for r in caplog.records if r.name.startswith("slack_bolt")] == []
        surface.edge.close()
    finally:
        mock.stop()


# --- the console finds the server ---------------------------------------------------------------------


def test_leader_address_is_read_from_the_lock(any_engine) -> None:
    leader = Leadership(any_engine, lambda: None)
    assert leader.start() is True
    try:
        assert leader_address(any_engine) is None
        leader.advertise("http://127.0.0.1:9123")
        assert leader_address(any_engine) == "http://127.0.0.1:9123"
    finally:
        leader.stop()
    assert leader_address(any_engine) is None or any_engine.dialect.name == "sqlite"
    successor = Leadership(any_engine, lambda: None)
    assert successor.start() is True
    try:
        assert leader_address(any_engine) is None  # a new leader clears what the last one said
    finally:
        successor.stop()


@pytest.mark.parametrize("any_engine", ["postgres"], indirect=True)
def test_a_leader_of_another_database_on_the_server_is_not_this_ones(any_engine) -> None:
    """pg_locks lists the advisory locks of every database on the server: Pacer on another
    database (a second deployment, or another run of these tests) must not be taken for ours."""
    elsewhere = dbmod.make_engine(any_engine.url.set(database="postgres").render_as_string(hide_password=False))
    try:
        with elsewhere.connect() as conn:
            conn.execute(text("SELECT set_config('application_name', 'pacer http://127.0.0.1:1', false)"))
            assert conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": LOCK_KEY}).scalar() is True
            assert leader_address(any_engine) is None
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": LOCK_KEY})
    finally:
        elsewhere.dispose()


def test_pacer_console_speaks_to_the_port_the_server_uses(tmp_path: Path) -> None:
    port, configured = _free_port(), _free_port()
    env = _env(tmp_path, PACER_API_TOKEN="console-token", PACER_PORT=str(configured), PACER_ROSTER="console=operator")
    server = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--port", str(port)], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        engine = dbmod.make_engine(env["DATABASE_URL"])
        while leader_address(engine) is None and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert leader_address(engine) == f"http://127.0.0.1:{port}", (
            server.stderr.read() if server.poll() is not None else "not up in 60 s"
        )
        done = subprocess.run(
            [sys.executable, "-m", "bot.cli", "console"],
            cwd=tmp_path,
            env=env,
            input="queue\nquit\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.send_signal(signal.SIGTERM)
        _, server_log = server.communicate(timeout=60)
    assert done.returncode == 0, done.stderr + server_log
    assert f"127.0.0.1:{port}/api/v1/chat" in done.stdout and str(configured) not in done.stdout, (
        done.stdout + server_log
    )
    assert "Queue: 0 waiting" in done.stdout  # the server answered `queue`


# --- the drain -------------------------------------------------------------------------------------------


def _pacer_with_a_running_turn(tmp_path: Path, seconds: str):  # type: ignore[no-untyped-def]
    settings = load({"DATABASE_URL": f"sqlite:///{tmp_path}/p.db", "PACER_ECHO_SECONDS": seconds}, toml_path=None)
    pacer = process.build(settings, deferrer=VirtualDeferrer(SystemClock()))
    with dbmod.session_scope(pacer.engine) as db:
        session = create_session(db, NewSession(requester="U1", scheduling_class="priority"), now=T0)
        db.flush()
        session_id = session.id or 0
    submit_turn(pacer.ctx, session_id, "a long piece of work")
    deadline = time.monotonic() + 10
    while not pacer.ctx.ports.workers.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    return pacer, session_id


def _turns(pacer, session_id: int) -> list[Turn]:  # type: ignore[no-untyped-def]
    with dbmod.session_scope(pacer.engine) as db:
        return list(db.exec(select(Turn).where(Turn.session_id == session_id)).all())


def test_a_turn_that_finishes_within_the_drain_reports_as_usual(tmp_path: Path) -> None:
    pacer, session_id = _pacer_with_a_running_turn(tmp_path, "0.3")
    assert drain(pacer, 30) == 0
    [turn] = _turns(pacer, session_id)
    assert turn.status == "done"
    # After the drain no turn starts here: a new one is kept back for the next leader.
    submit_turn(pacer.ctx, session_id, "one more", kind="follow_up")
    assert pacer.ctx.ports.workers.kept_back and pacer.ctx.ports.workers.pool.running() == []
    pacer.ctx.ports.workers.pool.shutdown()


def test_a_turn_still_running_at_the_deadline_is_handed_over(tmp_path: Path) -> None:
    pacer, session_id = _pacer_with_a_running_turn(tmp_path, "60")
    assert drain(pacer, 0.2) == 1
    pacer.ctx.ports.workers.pool.shutdown(wait=True)  # the halted agent's report arrives and changes nothing
    [turn] = _turns(pacer, session_id)
    assert (turn.status, turn.outcome) == ("failed", "interrupted")
    with dbmod.session_scope(pacer.engine) as db:
        session = db.get(Session, session_id)
        assert session is not None
        assert (
            session.status == "waiting" and session.hold_reason == "interrupted" and session.hold_retry_at is not None
        )
