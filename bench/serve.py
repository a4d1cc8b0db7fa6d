"""A real `pacer serve` for the HTTP benchmarks: its own process on 127.0.0.1, a free port, the
echo runner, a workdir of its own, and no return until /healthz answers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from bot.serve.demo import wait_until_up

START_SECONDS = 60


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_pacer(
    workdir: Path, url: str, port: int, env: Mapping[str, str], *, log_name: str = "server.log"
) -> subprocess.Popen[bytes]:
    """Start `pacer serve` on `url` with `env` on top of the defaults; its log is workdir/`log_name`."""
    full = {
        **os.environ, "DATABASE_URL": url, "PACER_RUNNER": "echo", "PACER_LOG_LEVEL": "WARNING",
        "PACER_WORKDIR": str(workdir / "work"), "PACER_CONFIG": str(workdir / "pacer.toml"), **env,
    }
    (workdir / "pacer.toml").write_text("")
    log = (workdir / log_name).open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=full, stdout=log, stderr=subprocess.STDOUT, cwd=str(workdir),
    )
    try:
        up = wait_until_up(f"http://127.0.0.1:{port}", START_SECONDS, alive=lambda: process.poll() is None)
    except BaseException:  # Ctrl-C while it starts: the caller never got the process to stop
        process.kill()
        raise
    if up:
        return process
    if process.poll() is not None:
        raise RuntimeError(f"pacer serve exited ({process.returncode}); see {workdir / log_name}")
    process.kill()
    raise RuntimeError(f"pacer serve did not answer /healthz within {START_SECONDS} s")
