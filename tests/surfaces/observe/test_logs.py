"""Logs as an operator reads them: a real `pacer serve --demo` whose lines are mostly Pacer's own,
in one format (uvicorn's included), every line a JSON object under PACER_LOG_FORMAT=json, and
every line about a session naming it."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bot.observe.logs import JsonFormatter
from tests.support.paths import ROOT

# The measure is the first minute of a demo: each run lasts at least that, and at most the
# second figure while the feed (about 12 s at its one-second pace) and the follow-up a labelled
# session fires once done have not both shown.
DEMO_SECONDS = (60, 90)
SESSION = re.compile(r"\bsession #(\d+)")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Demo:
    """`pacer serve --demo` in a process of its own, its log read line by line as it comes."""

    def __init__(self, tmp: Path, log_format: str) -> None:
        tmp.mkdir()
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PACER_", "SLACK_", "GITHUB_")) and k != "DATABASE_URL"
        }
        env |= {"PYTHONPATH": str(ROOT), "DATABASE_URL": f"sqlite:///{tmp}/pacer.db", "PACER_PORT": str(_port()),
                "PACER_LOG_FORMAT": log_format, "PACER_ECHO_SECONDS": "1"}
        self.lines: list[str] = []
        self.proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--demo"], cwd=tmp, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def has_shown(self, *texts: str) -> bool:
        return all(any(text in line for line in list(self.lines)) for text in texts)

    def stop(self) -> list[str]:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=10)
        return self.lines


# What a full demo shows: the feed's last line, and a follow-up fired by a labelled session done.
FINISHED = ("sessions waiting on a hold", "fired (ao_event)")


@pytest.mark.long
def test_a_demo_run_logs_mostly_pacer_in_one_format_and_json_on_request(tmp_path: Path) -> None:
    text = Demo(tmp_path / "text", "text")
    as_json = Demo(tmp_path / "json", "json")  # both at once: the test takes one run's time
    started = time.monotonic()
    try:
        while time.monotonic() - started < DEMO_SECONDS[1]:
            if (
                time.monotonic() - started >= DEMO_SECONDS[0]
                and text.has_shown(*FINISHED)
                and as_json.has_shown(*FINISHED)
            ):
                break
            time.sleep(0.5)
    finally:
        text_lines, json_lines = text.stop(), as_json.stop()
    shown = "\n".join(text_lines)

    # `2026-12-01 07:52:12,783 INFO pacer.demo [request=… session=…]: message`: the logger is the fourth field.
    text_loggers = [line.split(" ")[3].rstrip(":") if len(line.split(" ")) > 3 else "" for line in text_lines]
    assert all(text in shown for text in FINISHED), shown
    assert "POST /github/webhook issues.labeled #101 -> 202" in shown  # the label trigger, through the real endpoint
    assert "(run at now (" not in shown and "session #None" not in shown and "Traceback" not in shown
    assert all(name.startswith(("pacer", "uvicorn")) for name in text_loggers), shown
    assert sum(name.startswith("pacer") for name in text_loggers) >= 0.8 * len(text_lines), shown
    about = [line for line in text_lines if SESSION.search(line.partition("]: ")[2] or line)]
    assert about and all(re.search(r" \[[^]]*session=\d+\]: ", line) for line in about), shown

    entries = [json.loads(line) for line in json_lines]  # every line parses
    assert entries and all(set(e) >= {"time", "level", "logger", "message"} for e in entries)
    assert all(any(text in e["message"] for e in entries) for text in FINISHED)
    assert sum(e["logger"].startswith("pacer") for e in entries) >= 0.8 * len(entries)
    named = [e for e in entries if SESSION.search(e["message"])]
    assert named and all(isinstance(e.get("session_id"), int) for e in named)
    assert any(
        e.get("request_id") and e["logger"].startswith("pacer.") for e in entries
    )  # lines logged while answering


def test_a_traceback_stays_inside_its_one_json_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("pacer.x", logging.ERROR, __file__, 1, "failed %s", ("here",), sys.exc_info())
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["message"] == "failed here" and entry["level"] == "ERROR" and "ValueError: boom" in entry["exception"]
