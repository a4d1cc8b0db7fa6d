"""Logs as an operator reads them: a real `pacer serve --demo` whose lines are mostly Pacer's own,
in one format (uvicorn's included), and every line a JSON object under PACER_LOG_FORMAT=json."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from bot.logs import JsonFormatter

ROOT = Path(__file__).resolve().parents[1]
DEMO_SECONDS = 20  # the demo's feed takes about 12 s at its one-second pace


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_demo(tmp: Path, log_format: str) -> subprocess.Popen[str]:
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PACER_", "SLACK_", "GITHUB_")) and k != "DATABASE_URL"}
    env |= {"PYTHONPATH": str(ROOT), "DATABASE_URL": f"sqlite:///{tmp}/pacer.db", "PACER_PORT": str(_port()),
            "PACER_LOG_FORMAT": log_format, "PACER_ECHO_SECONDS": "1"}
    return subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--demo"], cwd=tmp, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _stop(proc: subprocess.Popen[str]) -> list[str]:
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out.splitlines()


def test_a_demo_run_logs_mostly_pacer_in_one_format_and_json_on_request(tmp_path: Path) -> None:
    text = _start_demo(tmp_path / "text", "text")
    as_json = _start_demo(tmp_path / "json", "json")  # both at once: the test takes one run's time
    try:
        time.sleep(DEMO_SECONDS)
    finally:
        text_lines, json_lines = _stop(text), _stop(as_json)

    # `2026-12-01 07:52:12,783 INFO pacer.demo: message`: the logger is the fourth field.
    text_loggers = [line.split(" ")[3].rstrip(":") if len(line.split(" ")) > 3 else "" for line in text_lines]
    assert any("sessions waiting on a hold" in line for line in text_lines), "\n".join(text_lines)
    assert all(name.startswith(("pacer", "uvicorn")) for name in text_loggers), "\n".join(text_lines)
    assert sum(name.startswith("pacer") for name in text_loggers) >= 0.8 * len(text_lines), "\n".join(text_lines)

    entries = [json.loads(line) for line in json_lines]  # every line parses
    assert entries and all(set(e) >= {"time", "level", "logger", "message"} for e in entries)
    assert any("sessions waiting on a hold" in e["message"] for e in entries)
    assert sum(e["logger"].startswith("pacer") for e in entries) >= 0.8 * len(entries)


def test_a_traceback_stays_inside_its_one_json_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("pacer.x", logging.ERROR, __file__, 1, "failed %s", ("here",), sys.exc_info())
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["message"] == "failed here" and entry["level"] == "ERROR" and "ValueError: boom" in entry["exception"]
