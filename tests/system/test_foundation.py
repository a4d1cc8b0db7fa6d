"""Packaging, settings, CLI and the migration: the ground every other test stands on."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import SQLModel

from bot.config.settings import SECRET_NAMES, load
from scheduler.errors import ConfigError
from scheduler.store import db as dbmod
from tests.support.paths import ROOT


def test_defaults_are_the_embedded_ones() -> None:
    s = load({}, toml_path=None)
    assert s.database_url == "sqlite:///./var/pacer.db"
    assert (s.host, s.port, s.max_sessions, s.agent_workers, s.runner) == ("127.0.0.1", 8080, 10, 12, "echo")
    assert s.effective_slots == 10


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PACER_MAX_SESSIONS": "-1"}, "PACER_MAX_SESSIONS='-1': must be a whole number from 1 to 10000"),
        ({"PACER_MAX_SESSIONS": "ten"}, "PACER_MAX_SESSIONS='ten': must be a whole number from 1 to 10000"),
        ({"PACER_MAX_SESSIONS": str(2**63)}, f"PACER_MAX_SESSIONS='{2**63}': must be a whole number from 1 to 10000"),
        ({"PACER_PORT": "70000"}, "PACER_PORT='70000': must be a TCP port"),
        ({"PACER_GATING": "maybe"}, "PACER_GATING='maybe': must be one of true/false"),
        ({"PACER_RESERVE_5H_PCT": "120"}, "PACER_RESERVE_5H_PCT='120': must be a percentage"),
        ({"DATABASE_URL": "mysql://x"}, "DATABASE_URL: must start with sqlite:///, postgres://"),
        ({"PACER_RUNNER": "gpt"}, "PACER_RUNNER='gpt': must be 'echo' or 'command'"),
        ({"PACER_ROSTER": "U1=admin"}, "PACER_ROSTER: entry 'U1=admin' must be USER=operator"),
        ({"SLACK_API_URL": "ftp://x"}, "SLACK_API_URL='ftp://x': must be an http:// or https:// URL"),
        (
            {"GITHUB_APP_ID": "12"},
            "GITHUB_APP_ID is set: GITHUB_APP_PRIVATE_KEY (or GITHUB_APP_PRIVATE_KEY_FILE) must be set too",
        ),
        ({"PACER_QUOTA_SOURCE": "pool"}, "PACER_QUOTA_SOURCE=pool: set PACER_POOL_FILE or PACER_POOL_URL"),
    ],
)
def test_bad_settings_name_the_variable_and_the_rule(env, message) -> None:
    with pytest.raises(ConfigError) as err:
        load(env)
    assert message in str(err.value)


@pytest.mark.parametrize("name", sorted(SECRET_NAMES))
@pytest.mark.parametrize("blank", [" ", "\t\n", "\u00a0"])
def test_a_secret_of_only_whitespace_stops_start_up_with_its_name(name: str, blank: str, tmp_path: Path) -> None:
    # Accepted, GitHub would verify deliveries signed with the whitespace and Slack would answer
    # every request 500; an empty value still means unset.
    with pytest.raises(ConfigError) as err:
        load({name: blank}, toml_path=None)
    assert str(err.value) == f"{name}: is only whitespace; set the real secret, or leave {name} unset"
    cfg = tmp_path / "pacer.toml"
    cfg.write_text(f"[settings]\n{name.lower()} = {json.dumps(blank)}\n")
    with pytest.raises(ConfigError, match=f"^{name}: is only whitespace"):
        load({}, toml_path=cfg)
    assert getattr(load({name: ""}, toml_path=None), name.lower().removeprefix("pacer_")) is None


def test_fly_postgres_url_is_rewritten() -> None:
    s = load({"DATABASE_URL": "postgres://u:p@db.internal:5432/pacer"})
    assert s.database_url == "postgresql+psycopg://u:p@db.internal:5432/pacer"


def test_secrets_are_redacted_from_repr() -> None:
    s = load({"SLACK_BOT_TOKEN": "xoxb-very-secret", "PACER_API_TOKEN": "tok"})
    assert "xoxb-very-secret" not in repr(s) and "tok'" not in repr(s)


def test_toml_roster_and_settings(tmp_path: Path) -> None:
    cfg = tmp_path / "pacer.toml"
    cfg.write_text('[settings]\npacer_max_sessions = 4\n[roster]\nU1 = "operator"\n')
    s = load({"PACER_ROSTER": "U2=member"}, toml_path=cfg)
    assert s.max_sessions == 4 and s.roster == {"U2": "member", "U1": "operator"}
    cfg.write_text("[settings]\nbogus = 1\n")
    with pytest.raises(ConfigError, match="unknown setting 'BOGUS'"):
        load({}, toml_path=cfg)


# The sorted indexes are compared below, by their statements: alembic says it skips them.
@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
def test_migration_matches_the_models(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    dbmod.migrate(url)
    engine = dbmod.make_engine(url)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"include_name": _compared})
        diff = compare_metadata(ctx, SQLModel.metadata)
    assert diff == [], diff
    # Alembic cannot compare an index with a sorted column: its statement must be the models' own.
    made = dbmod.make_engine(f"sqlite:///{tmp_path}/made.db")
    SQLModel.metadata.create_all(made)
    assert _index_sql(engine, SORTED_INDEXES) == _index_sql(made, SORTED_INDEXES)
    assert all(_index_sql(engine, SORTED_INDEXES))


SORTED_INDEXES = ("ix_sessions_rank", "ix_sessions_class_rank")  # (precedence DESC): the queue's order


def _compared(name: str | None, kind: str, _parent: object) -> bool:
    if kind == "index":
        return name not in SORTED_INDEXES
    return kind != "table" or name in dbmod.PACER_TABLE_PREFIXES


def _index_sql(engine: Any, names: tuple[str, ...]) -> list[str]:
    with engine.connect() as conn:
        return [
            str(conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).scalar())
            for name in names
        ]


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd or ROOT, timeout=60)


@pytest.mark.parametrize("sub", ["", "serve", "migrate", "console", "config"])
def test_every_subcommand_explains_itself(sub: str) -> None:
    out = _cli(*([sub] if sub else []), "--help")
    assert out.returncode == 0 and "usage: pacer" in out.stdout and len(out.stdout) > 120


def test_invalid_setting_exits_nonzero_with_one_line(tmp_path: Path) -> None:
    out = _cli("config", env={"PACER_MAX_SESSIONS": "-1"}, cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "pacer: configuration error: PACER_MAX_SESSIONS='-1': must be a whole number from 1 to 10000"
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.long
def test_serve_answers_healthz_within_15_seconds(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "PACER_PORT": str(port), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        started, status = time.monotonic(), None
        while time.monotonic() - started < 15:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert status == 200
        assert (tmp_path / "var" / "pacer.db").exists()
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    # SIGTERM is a clean stop: uvicorn drains, the lifespan stops the scheduler, and then it
    # re-raises the signal, so the exit status is -15 after a complete shutdown.
    assert proc.returncode in (0, -15), out
    assert "Application shutdown complete" in out and "scheduler stopped" in out


@pytest.mark.long
def test_wheel_ships_templates_and_migrations(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    wheel = next(tmp_path.glob("pacer-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "templates/chat/help.j2" in names
    assert "scheduler/store/migrations/env.py" in names
    for layer in ("rules", "store", "engine", "holds", "pauses", "steering"):  # each folder a package
        assert f"scheduler/{layer}/__init__.py" in names, layer
    assert any(n.startswith("scheduler/store/migrations/versions/0001") for n in names)


def test_serve_on_sqlite_imports_no_job_queue() -> None:
    """procrastinate and psycopg were a sixth of `pacer serve`'s start-up imports (measured), paid
    by every server the suite starts; a server on SQLite runs its turns in-process and needs
    neither. With PACER_TURN_QUEUE=procrastinate on PostgreSQL, build_dispatcher imports them."""
    probe = ("import sys; from bot.cli.main import cmd_serve; from bot.serve.server import serve; "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'procrastinate', 'psycopg'}))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
