"""The CLI as a shell uses it: output piped into a reader that stops early, and `pacer config`
showing what is in force without a secret."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bot.config.settings import VARIABLES, in_force, load, redact_url
from tests.support.paths import ROOT


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PACER_", "SLACK_", "GITHUB_")) and k != "DATABASE_URL"
    }
    return {**env, "PYTHONPATH": str(ROOT), "DATABASE_URL": f"sqlite:///{tmp}/pacer.db", **extra}


def test_a_reader_that_closes_the_pipe_early_ends_pacer_quietly(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head` that has already read its ten lines: every write meets EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "bot.cli", "policy", "--json"], cwd=tmp_path, env=_env(tmp_path),
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 141  # what a shell reports for a command ended by SIGPIPE


def test_redact_url_hides_only_the_password() -> None:
    assert redact_url("postgresql+psycopg://pacer:s3cr%40t@db.internal:5432/pacer") == "postgresql+psycopg://pacer:***@db.internal:5432/pacer"
    assert redact_url("https://user:pw@pool.example/readings?x=1") == "https://user:***@pool.example/readings?x=1"
    assert redact_url("postgresql+psycopg://pacer@db:5432/pacer") == "postgresql+psycopg://pacer@db:5432/pacer"
    assert redact_url("sqlite:///./var/pacer.db") == "sqlite:///./var/pacer.db"


def test_in_force_shows_every_setting_with_secrets_hidden(tmp_path: Path) -> None:
    cfg = tmp_path / "pacer.toml"
    cfg.write_text('[settings]\npacer_max_sessions = 4\n[roster]\nU1 = "operator"\n')
    s = load(
        {
            "DATABASE_URL": "postgres://pacer:hunter2@db:5432/pacer",
            "SLACK_BOT_TOKEN": "xoxb-1",
            "PACER_ROSTER": "U2=member",
        },
        toml_path=cfg,
    )
    rows = {row.name: row for row in in_force(s)}
    assert set(rows) == {v.name for v in VARIABLES}
    assert rows["DATABASE_URL"].value == "postgresql+psycopg://pacer:***@db:5432/pacer"
    assert rows["SLACK_BOT_TOKEN"].value == "***" and rows["GITHUB_TOKEN"].value == "(unset)"
    assert rows["PACER_MAX_SESSIONS"].value == "4" and rows["PACER_GATING"].value == "true"
    assert rows["PACER_ROSTER"].value == "U1=operator,U2=member"
    assert "hunter2" not in repr(s) and "U1" in repr(s)


def test_pacer_config_prints_the_values_in_force_and_no_password(tmp_path: Path) -> None:
    (tmp_path / "pacer.toml").write_text('[roster]\nU1 = "operator"\n')
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "config"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(tmp_path, DATABASE_URL="postgres://pacer:hunter2@db:5432/pacer", GITHUB_WEBHOOK_SECRET="whsec"),
    )
    assert done.returncode == 0, done.stderr
    assert "hunter2" not in done.stdout and "whsec" not in done.stdout
    lines = done.stdout.splitlines()
    assert any(
        line.startswith("DATABASE_URL") and line.endswith("= postgresql+psycopg://pacer:***@db:5432/pacer")
        for line in lines
    )
    assert any(line.startswith("PACER_ROSTER") and line.endswith("= U1=operator") for line in lines)
    assert any(line.startswith("GITHUB_WEBHOOK_SECRET") and line.endswith("= ***") for line in lines)
