"""Settings as `pacer` meets them from a shell: every PACER_* variable it reads is a setting,
a stray one is named, pacer.toml's log format holds from the first line, `--version`, and
`--config` on either side of the subcommand."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from bot.config.settings import VARIABLES, load
from tests.support.paths import ROOT


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PACER_", "SLACK_", "GITHUB_")) and k != "DATABASE_URL"
    }
    return {**env, "PYTHONPATH": str(ROOT), "DATABASE_URL": f"sqlite:///{tmp}/pacer.db", **extra}


def _pacer(tmp: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], cwd=tmp, env=_env(tmp, **extra),
                          capture_output=True, text=True, timeout=60)


def _shown(output: str, name: str) -> str:
    found = re.search(rf"^{name} +=(.*)$", output, re.M)
    assert found, output
    return found.group(1).strip()


def test_the_metrics_token_is_a_setting_shown_listed_and_read_from_pacer_toml(tmp_path: Path) -> None:
    done = _pacer(tmp_path, "config", PACER_METRICS_TOKEN="scrape-me-0123456789")
    assert done.returncode == 0, done.stderr
    assert _shown(done.stdout, "PACER_METRICS_TOKEN") == "***" and "scrape-me" not in done.stdout + done.stderr
    assert "PACER_METRICS_TOKEN" not in done.stderr  # no word of it being unknown
    (tmp_path / "pacer.toml").write_text('[settings]\nPACER_METRICS_TOKEN = "from-the-file"\n')
    assert load({}, toml_path=tmp_path / "pacer.toml").metrics_token == "from-the-file"
    table = set(re.findall(r"^\| `([A-Z_0-9]+)` \|", (ROOT / "README.md").read_text(), re.M))
    assert table == {var.name for var in VARIABLES}  # the README's table names every setting, and only those


def test_a_pacer_variable_that_is_no_setting_is_named_with_the_nearest_setting(tmp_path: Path) -> None:
    done = _pacer(tmp_path, "config", PACER_PORTT="9000", PACER_FROBNICATE="1", PACER_TEST_DATABASE_URL="sqlite://")
    assert done.returncode == 0, done.stderr
    unknown = "is set but is not a Pacer setting, so it changes nothing"
    assert f"PACER_PORTT {unknown}; did you mean PACER_PORT?" in done.stderr
    assert f"PACER_FROBNICATE {unknown} (`pacer config` lists every setting)." in done.stderr
    assert "PACER_TEST_DATABASE_URL" not in done.stderr  # the test suite's own switch is known
    assert _shown(done.stdout, "PACER_PORT") == "8080"  # and it changed nothing


def test_the_suites_switches_for_workers_and_the_cpu_log_are_known() -> None:
    """tests/conftest.py reads PACER_TEST_WORKERS, tests/support/cpu_log.py PACER_TEST_CPU_LOG: set
    for a run, each reaches every `pacer` the suite starts, which must not warn of them."""
    from bot.config.preflight import strays

    switches = {"PACER_TEST_WORKERS": "2", "PACER_TEST_CPU_LOG": "cpu.jsonl", "PACER_PORTT": "1"}
    assert [stray.name for stray in strays(switches, [var.name for var in VARIABLES])] == ["PACER_PORTT"]


def test_pacer_version_prints_the_version(tmp_path: Path) -> None:
    done = _pacer(tmp_path, "--version")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert done.returncode == 0 and done.stdout.strip() == f"pacer {declared}", done.stdout + done.stderr


def test_config_is_taken_after_the_subcommand_as_well_as_before(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.toml"
    other.write_text("[settings]\nPACER_PORT = 9123\n")
    for args in (("config", "--config", str(other)), ("--config", str(other), "config")):
        done = _pacer(tmp_path, *args)
        assert done.returncode == 0, done.stderr
        assert _shown(done.stdout, "PACER_PORT") == "9123" and f"from {other}" in done.stdout
    done = _pacer(tmp_path, "policy", "--json", "--config", str(other))
    assert done.returncode == 0 and json.loads(done.stdout), done.stderr


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_log_format_in_pacer_toml_holds_from_the_first_line(tmp_path: Path) -> None:
    """It held only from uvicorn's start: the leader's and the "Pacer on" lines came out as text."""
    (tmp_path / "pacer.toml").write_text('[settings]\nPACER_LOG_FORMAT = "json"\n')
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve"], cwd=tmp_path,
                            env=_env(tmp_path, PACER_PORT=str(_port())), stdout=subprocess.DEVNULL,
                            stderr=open(tmp_path / "log", "w"), text=True)  # noqa: SIM115 — closed with the process
    try:
        deadline = time.monotonic() + 60
        while "Application startup complete" not in (tmp_path / "log").read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "log").read_text()
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    lines = (tmp_path / "log").read_text().splitlines()
    assert any("Pacer on http://" in json.loads(line)["message"] for line in lines), lines
    assert lines[0] and all(json.loads(line)["level"] for line in lines)  # every line, the first included
