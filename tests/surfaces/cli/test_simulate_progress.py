"""`pacer simulate`'s progress bar: on stderr, only when stderr is a terminal, so the report on
stdout is the same either way. Real processes, one with a pseudo-terminal for its stderr."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.support.paths import ROOT

SCENARIO = """
[simulation]
start = "2026-11-02T00:00:00Z"
duration = "50m"

[[windows]]
name = "5h"
period = "5h"
budget_usd = 6
first_reset = "+20m"

[[runtimes]]
name = "claude_code"
burn_usd_per_min = 0.2

[[arrivals]]
at = "+2m"
genesis = "github_label"
duration = "15m"
count = 6
every = "1m"
"""


def _simulate(scenario: Path, *, stderr: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "bot.cli", "simulate", str(scenario), "--compare"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=stderr)


def _read_all(fd: int, proc: subprocess.Popen[bytes]) -> bytes:
    """Everything written to the terminal until the process exits and the terminal drains."""
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the other end closed: Linux reports EIO
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    return out


def _without_speed(report: bytes) -> list[bytes]:
    return [line for line in report.splitlines() if not line.startswith(b"wall seconds")]


@pytest.mark.skipif(not hasattr(pty, "openpty"), reason="needs a pseudo-terminal")
def test_the_bar_shows_on_a_terminal_and_the_report_is_unchanged(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(SCENARIO)

    piped = _simulate(scenario, stderr=subprocess.PIPE)
    plain_out, plain_err = piped.communicate(timeout=300)
    assert piped.returncode == 0 and plain_err == b""  # not a terminal: no bar at all

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a new one is 0 columns wide
    try:
        proc = _simulate(scenario, stderr=follower)
        os.close(follower)
        follower = -1
        terminal = _read_all(leader, proc)
        out = proc.stdout.read() if proc.stdout else b""
        assert proc.wait(timeout=300) == 0
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    for policy in (b"pacer", b"fifo", b"flat-target"):
        assert b"simulating " + policy + b":" in terminal
    assert b"/1 " in terminal  # of the scenario's one simulated hour (50 minutes, rounded up)
    assert _without_speed(out) == _without_speed(plain_out)
