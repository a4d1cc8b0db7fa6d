"""`pacer serve --demo` keeps its triggers, policy and sessions off ./var/pacer.db: a database of
its own unless DATABASE_URL names one."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bot.config.settings import load
from bot.serve.demo import own_database
from tests.support.paths import ROOT


def test_without_database_url_the_demo_gets_a_temporary_database() -> None:
    settings = own_database(load({}), {})
    assert settings.database_url.startswith("sqlite:///") and settings.database_url.endswith("/pacer.db")
    assert "./var/" not in settings.database_url
    assert own_database(load({}), {}).database_url != settings.database_url  # a fresh one each run


def test_a_database_url_from_the_environment_or_pacer_toml_is_kept(tmp_path: Path) -> None:
    mine = f"sqlite:///{tmp_path}/mine.db"
    assert own_database(load({"DATABASE_URL": mine}), {"DATABASE_URL": mine}).database_url == mine
    cfg = tmp_path / "pacer.toml"
    cfg.write_text(f'[settings]\ndatabase_url = "{mine}"\n')
    assert own_database(load({}, toml_path=cfg), {}).database_url == mine


@pytest.mark.long
def test_a_demo_run_leaves_nothing_in_var(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PACER_", "SLACK_", "GITHUB_")) and k != "DATABASE_URL"
    }
    env |= {"PYTHONPATH": str(ROOT), "PACER_PORT": str(port)}
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--demo"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert "demo: on a database of its own" in out, out
    assert not (tmp_path / "var" / "pacer.db").exists()
