"""The CLI as a shell uses it: output piped into a reader that stops early, and `pacer config`
showing what is in force without a secret."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PACER_", "SLACK_", "GITHUB_")) and k != "DATABASE_URL"}
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
