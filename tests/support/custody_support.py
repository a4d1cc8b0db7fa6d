"""What tests of agents in custody need: the agent user (created when the tests run as root, as CI
does), a directory every user can read for the agents' programs and working trees, and the
settings that put agents in the custody this machine allows — the configuration that ships.

PACER_REQUIRE_CUSTODY=1 (CI) turns "this machine cannot confine an agent" into a failure."""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from integrations.runners.custody import sandbox_works

AGENT_USER = "pacer-agent"
FIXTURES = Path(__file__).parent / "fixtures" / "agents"


def agent_user() -> str | None:
    """The unprivileged user agents run as: created when running as root; None otherwise."""
    if os.geteuid() != 0:
        return None
    # Under a lock: the suite's worker processes may all ask at once, and the second useradd fails.
    with open("/tmp/pacer-agent-user.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            pwd.getpwnam(AGENT_USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "--create-home", AGENT_USER], check=True, capture_output=True)
    return AGENT_USER


def sandbox_usable() -> bool:
    found = shutil.which("bwrap")
    return found is not None and sandbox_works(found, {})


def require_custody() -> None:
    if os.environ.get("PACER_REQUIRE_CUSTODY") == "1" and (agent_user() is None or not sandbox_usable()):
        pytest.fail("PACER_REQUIRE_CUSTODY=1: this machine must run the tests as root with bubblewrap working")


def agent_python() -> str:
    """A Python every user can run (the test's own may live under /root)."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def make_room(**programs: str) -> Path:
    """A directory every user can pass through and read, with the agents' programs in `bin/` (the
    fixtures, and `programs` by file name): pytest's own temporary directories are private to the
    user running the tests. `remove_room` takes it away."""
    room = Path(tempfile.mkdtemp(prefix="pacer-custody-", dir="/tmp"))
    room.chmod(0o755)
    shutil.copytree(FIXTURES, room / "bin")
    for name, text in programs.items():
        (room / "bin" / name).write_text(text)
    for path in (room / "bin", *(room / "bin").iterdir()):
        path.chmod(0o755)
    return room


def remove_room(room: Path) -> None:
    shutil.rmtree(room, ignore_errors=True)


@contextmanager
def open_room() -> Iterator[Path]:
    room = make_room()
    try:
        yield room
    finally:
        remove_room(room)


def custody_settings(room: Path, mode: str) -> dict[str, str]:
    """The settings for `mode`: "shipped" (the agent user when root, the sandbox where it works:
    what the image runs), "sandbox" (the sandbox alone) or "none" (neither)."""
    settings = {"PACER_AGENT_BIND": str(room / "bin"), "PACER_AGENT_HOME": str(room / "home")}
    if mode == "none":
        settings["PACER_AGENT_SANDBOX"] = "off"
    elif mode == "sandbox":
        settings["PACER_AGENT_SANDBOX"] = "bwrap"
    user = agent_user() if mode == "shipped" else None
    if user is not None:
        settings["PACER_AGENT_USER"] = user
        del settings["PACER_AGENT_HOME"]  # the user's own home
    (room / "home").mkdir(exist_ok=True)
    return settings


def agent_processes(program: Path) -> list[int]:
    """The pids of every process on this machine running `program`, whoever supervises it."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if str(program).encode() in f.read():
                        found.append(int(name))
            except OSError:
                continue
    return found
