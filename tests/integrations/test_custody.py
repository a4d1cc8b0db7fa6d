"""The leash and the custody around every agent, with real processes: an agent and everything it
spawned end when its supervisor dies, when it is halted (SIGTERM, then SIGKILL after the grace) and
when it exits; its environment is an allowlist; start-up ends agents a dead Pacer left behind; the
settings that would put an agent as root, or hand it Pacer's names, fail at start-up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bot.config.settings import load
from integrations.runners import leash
from integrations.runners.custody import SUPERVISOR, Custody, choose, end_unsupervised, supervisor_mark
from integrations.workspaces import GitRemote, WorkspaceError, Workspaces
from scheduler.errors import ConfigError
from tests.integrations.test_workspaces import bare_remote, git

LEASH = [sys.executable, "-I", "-S", leash.__file__]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _until(check: object, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def _pids(path: Path, count: int) -> list[int]:
    assert _until(lambda: path.exists() and len(path.read_text().split()) >= count), "the agent never said its pids"
    return [int(p) for p in path.read_text().split()]


def test_the_agent_and_what_it_spawned_die_with_the_supervisor(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # The agent starts a grandchild in a session of its own (what a daemonising tool does).
    agent = f"setsid sh -c 'echo $$ >> {pids}; exec sleep 300' & echo $$ >> {pids}; sleep 300"
    supervisor = textwrap.dedent(f"""
        import os, subprocess, sys, time
        subprocess.Popen({LEASH!r} + ["--parent", str(os.getpid()), "--grace", "1", "--", "sh", "-c", {agent!r}], start_new_session=True)
        time.sleep(300)
    """)
    parent = subprocess.Popen([sys.executable, "-c", supervisor])
    spawned = _pids(pids, 2)
    assert all(_alive(p) for p in spawned)
    parent.send_signal(signal.SIGKILL)  # a kill -9 of pacer serve
    parent.wait()
    assert _until(lambda: not any(_alive(p) for p in spawned), 5), [p for p in spawned if _alive(p)]


def test_the_leash_reports_the_agents_exit_and_ends_what_it_left(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    left = subprocess.run(
        [*LEASH, "--parent", str(os.getpid()), "--", "sh", "-c", f"sleep 300 & echo $! > {pids}; exit 7"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert left.returncode == 7
    assert not _alive(int(pids.read_text()))  # the background sleep went with the agent
    killed = subprocess.run(
        [*LEASH, "--parent", str(os.getpid()), "--", "sh", "-c", "kill -9 $$"], capture_output=True, timeout=30
    )
    assert killed.returncode == 128 + signal.SIGKILL
    missing = subprocess.run(
        [*LEASH, "--parent", str(os.getpid()), "--", "/no/such/agent"], capture_output=True, text=True, timeout=30
    )
    assert missing.returncode == leash.NOT_EXECUTABLE and missing.stderr.startswith(leash.CANNOT_RUN)
    orphaned = subprocess.run([*LEASH, "--parent", "1", "--", "true"], capture_output=True, timeout=30)
    assert orphaned.returncode == leash.PARENT_GONE  # its supervisor was gone before the agent started
    bad = subprocess.run([*LEASH, "--grace", "1", "--", "true"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "usage: leash.py --parent PID" in bad.stderr


def test_a_halt_asks_first_and_kills_after_the_grace(tmp_path: Path) -> None:
    polite = subprocess.Popen(
        [
            *LEASH,
            "--parent",
            str(os.getpid()),
            "--grace",
            "5",
            "--",
            "sh",
            "-c",
            "trap 'exit 42' TERM; sleep 300 & wait",
        ],
        start_new_session=True,
    )
    time.sleep(0.5)
    started = time.monotonic()
    polite.send_signal(signal.SIGTERM)
    assert polite.wait(timeout=10) == 42 and time.monotonic() - started < 4  # it stopped when asked
    stubborn = subprocess.Popen(
        [*LEASH, "--parent", str(os.getpid()), "--grace", "1", "--", "sh", "-c", "trap '' TERM; sleep 300 & wait"],
        start_new_session=True,
    )
    time.sleep(0.5)
    started = time.monotonic()
    stubborn.send_signal(signal.SIGTERM)
    assert stubborn.wait(timeout=10) == 128 + signal.SIGKILL and 0.9 < time.monotonic() - started < 5


def test_the_prompt_file_is_the_agents_descriptor_3(tmp_path: Path) -> None:
    fd = os.memfd_create("prompt", 0)
    os.write(fd, "the whole prompt €".encode())
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        done = subprocess.run(
            [*LEASH, "--parent", str(os.getpid()), "--fd", str(fd), "--", "cat", "/dev/fd/3"],
            pass_fds=(fd,),
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        os.close(fd)
    assert done.stdout == "the whole prompt €"


def test_start_up_ends_agents_whose_supervisor_is_gone() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = subprocess.Popen(["sleep", "300"], env={"PATH": os.defpath, SUPERVISOR: f"{dead.pid}:1"})
    kept = subprocess.Popen(["sleep", "300"], env={"PATH": os.defpath, SUPERVISOR: supervisor_mark(os.getpid())})
    try:
        assert _until(lambda: _alive(orphan.pid) and _alive(kept.pid))
        ended = end_unsupervised()
        assert orphan.pid in ended and kept.pid not in ended
        assert orphan.wait(timeout=10) == -signal.SIGKILL and kept.poll() is None
    finally:
        kept.kill()
        kept.wait()


def test_the_agents_environment_is_an_allowlist() -> None:
    environ = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "ANTHROPIC_API_KEY": "sk-ant",
        "CLAUDE_CODE_USE_BEDROCK": "1",
        "HOME": "/home/pacer",
        "DATABASE_URL": "postgres://u:p@h/db",
        "GITHUB_TOKEN": "ghp",
        "SLACK_BOT_TOKEN": "xoxb",
        "PACER_ROSTER": "U1=operator",
        "PACER_WORKSPACES": "/srv/ws",
        "PACER_TRIGGERS_FILE": "/srv/t.toml",
        "AWS_SECRET": "x",
        "MY_TOOL_TOKEN": "tool",
    }
    custody = Custody(home=Path("/srv/agent-home"), passthrough=frozenset({"MY_TOOL_TOKEN"}))
    env = custody.environment(environ, {"PACER_TURN_ID": "7"})
    assert env == {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "ANTHROPIC_API_KEY": "sk-ant",
        "CLAUDE_CODE_USE_BEDROCK": "1",
        "MY_TOOL_TOKEN": "tool",
        "HOME": "/srv/agent-home",
        SUPERVISOR: supervisor_mark(os.getpid()),
        "PACER_TURN_ID": "7",
    }


@pytest.mark.parametrize(("value", "message"), [
    ("GITHUB_TOKEN", "PACER_AGENT_ENV: GITHUB_TOKEN is Pacer's own; Pacer's settings and secrets"),
    ("OK,PACER_API_TOKEN", "PACER_AGENT_ENV: PACER_API_TOKEN is Pacer's own"),
    ("1BAD", "PACER_AGENT_ENV: '1BAD' is not an environment variable name"),
])
def test_naming_pacers_own_variables_for_the_agent_stops_start_up(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load({"PACER_AGENT_ENV": value}, toml_path=None)
    with pytest.raises(ConfigError, match="PACER_AGENT_SANDBOX='maybe': must be 'auto', 'bwrap' or 'off'"):
        load({"PACER_AGENT_SANDBOX": "maybe"}, toml_path=None)
    with pytest.raises(ConfigError, match="PACER_AGENT_BIND: 'relative/bin' must be an absolute path"):
        load({"PACER_AGENT_BIND": "/opt/x,relative/bin"}, toml_path=None)


def test_an_agent_never_runs_as_root_and_a_user_needs_root() -> None:
    with pytest.raises(ConfigError, match="no such user on this machine"):
        choose(user="no-such-agent-user", sandbox="off", home=None)
    if os.geteuid() == 0:
        with pytest.raises(ConfigError, match="Pacer runs as root, and an agent never does; set PACER_AGENT_USER"):
            choose(user=None, sandbox="off", home=None)
        with pytest.raises(ConfigError, match="PACER_AGENT_USER='root': is root"):
            choose(user="root", sandbox="off", home=None)
    else:
        with pytest.raises(ConfigError, match="Pacer must run as root to start agents as"):
            choose(user=os.environ.get("USER") or "nobody", sandbox="off", home=None)


def test_pacers_git_runs_nothing_a_repository_configures_and_refuses_a_borrowing_one(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path)
    spaces = Workspaces(tmp_path / "ws", GitRemote(f"file://{remote}/{{repository}}.git"))
    space = spaces.open(session_id=1, repository="acme/api", title="x")
    (space.path / "new.txt").write_text("work\n")
    git("add", "new.txt", cwd=space.path)
    git("commit", "-q", "-m", "work", cwd=space.path)
    # Then what an agent would plant (its own git would run these: they are its own to run).
    marker = tmp_path / "ran"
    hook = f"#!/bin/sh\ntouch {marker}\n"
    mirror = spaces.mirror_path("acme/api")
    for where in (mirror / "hooks", space.path / ".git" / "hooks"):
        for name in ("pre-push", "reference-transaction", "post-update", "pre-auto-gc"):
            (where / name).write_text(hook)
            (where / name).chmod(0o755)
    git("config", "core.fsmonitor", str(mirror / "hooks" / "pre-push"), cwd=space.path)
    git("config", "--file", str(mirror / "config"), "core.fsmonitor", str(mirror / "hooks" / "pre-push"))
    assert spaces.new_commits(space) == 1
    spaces.push(space)
    spaces.sync("acme/api")
    assert not marker.exists()
    assert "work" in git("--git-dir", str(remote / "acme" / "api.git"), "log", "--format=%s", space.branch)
    (space.path / ".git" / "objects" / "info" / "alternates").write_text(str(mirror / "objects") + "\n")
    with pytest.raises(
        WorkspaceError, match="borrows objects: Pacer does not publish from a repository changed this way"
    ):
        spaces.new_commits(space)
