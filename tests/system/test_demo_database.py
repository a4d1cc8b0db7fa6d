"""`pacer serve --demo` keeps its triggers, policy and sessions off ./var/pacer.db: a database of
its own unless DATABASE_URL names one, removed however the demo stops; and the way to watch it
that it prints works as printed."""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.config.settings import load
from bot.serve.demo import demo_database
from tests.support.paths import ROOT

OWN = re.compile(r"demo: on a database of its own, removed when the demo stops: sqlite:///(\S+)/pacer\.db")


def test_without_database_url_the_demo_gets_a_temporary_database() -> None:
    settings, folder = demo_database(load({}), {})
    again, other = demo_database(load({}), {})
    try:
        assert folder and settings.database_url == f"sqlite:///{folder}/pacer.db" and Path(folder).is_dir()
        assert "./var/" not in settings.database_url
        assert again.database_url != settings.database_url  # a fresh one each run
    finally:
        for made in (folder, other):
            shutil.rmtree(str(made), ignore_errors=True)


def test_a_database_url_from_the_environment_or_pacer_toml_is_kept(tmp_path: Path) -> None:
    mine = f"sqlite:///{tmp_path}/mine.db"
    assert demo_database(load({"DATABASE_URL": mine}), {"DATABASE_URL": mine}) == (load({"DATABASE_URL": mine}), None)
    cfg = tmp_path / "pacer.toml"
    cfg.write_text(f'[settings]\ndatabase_url = "{mine}"\n')
    settings, folder = demo_database(load({}, toml_path=cfg), {})
    assert settings.database_url == mine and folder is None


class Demo:
    """A real `pacer serve --demo` on loopback, as a newcomer starts it (no PACER_*, no
    DATABASE_URL), its output read line by line as it comes."""

    def __init__(self, cwd: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("PACER_", "SLACK_", "GITHUB_")) and k != "DATABASE_URL"}
        self.env |= {"PYTHONPATH": str(ROOT), "PACER_PORT": str(self.port)}
        self.proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--demo"], cwd=cwd, env=self.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for(self, pattern: str, seconds: float = 60) -> re.Match[str]:
        """The first line matching `pattern`, waiting for it as the output comes."""
        deadline = time.monotonic() + seconds
        wanted = re.compile(pattern)
        for line in self.seen:
            if found := wanted.search(line):
                return found
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                assert self.proc.poll() is None, "".join(self.seen)
                continue
            self.seen.append(line)
            if found := wanted.search(line):
                return found
        raise AssertionError(f"no line matched {pattern!r}:\n{''.join(self.seen)}")

    def stop(self, signum: int) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    started = Demo(tmp_path)
    try:
        yield started
    finally:
        started.stop(signal.SIGKILL)


@pytest.mark.long
def test_sigterm_removes_the_demos_database_and_its_hint_works_as_printed(demo: Demo, tmp_path: Path) -> None:
    """SIGTERM is how docker stop, systemd and Fly stop a process; uvicorn stops gracefully and
    raises it again, which once ended the process before anything registered for exit ran."""
    folder = Path(demo.wait_for(OWN.pattern).group(1))
    command = demo.wait_for(r"demo: to watch it, in another terminal: (.+)$").group(1)
    live = demo.wait_for(r"demo: the live page: (\S+)$").group(1)
    assert (folder / "pacer.db").exists()
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "pacer").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m bot.cli "$@"\n')
    (shim / "pacer").chmod(0o755)
    elsewhere = tmp_path / "another-terminal"
    elsewhere.mkdir()
    watched = subprocess.run(["bash", "-c", command], input="new write the changelog\nqueue\nquit\n", cwd=elsewhere,
                             env=demo.env | {"PATH": f"{shim}:{os.environ['PATH']}", "PACER_PORT": "1"},
                             capture_output=True, text=True, timeout=60)
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert watched.stdout.startswith("Pacer console as api token (operator)."), watched.stdout
    assert re.search(r"Created #\d+ write the changelog", watched.stdout), watched.stdout
    assert "not on the roster" not in watched.stdout and "error:" not in watched.stdout, watched.stdout
    with httpx.Client(follow_redirects=True, timeout=10) as browser:
        page = browser.get(live)
    assert page.status_code == 200 and "write the changelog" in page.text
    assert demo.stop(signal.SIGTERM) == -signal.SIGTERM
    assert not folder.exists()


@pytest.mark.long
def test_ctrl_c_removes_the_demos_database_and_leaves_nothing_in_var(demo: Demo, tmp_path: Path) -> None:
    folder = Path(demo.wait_for(OWN.pattern).group(1))
    demo.wait_for(r"Uvicorn running on")
    demo.stop(signal.SIGINT)
    assert not folder.exists()
    assert not (tmp_path / "var" / "pacer.db").exists()
