"""Custody: where an agent runs, what it sees, and that it ends with the process that supervises it.

An agent runs prompts that outsiders can shape, so Pacer treats it as hostile. Every agent turn
runs under the leash (`leash.py`: it dies with its supervisor and takes everything it spawned
with it), with an environment built from an allowlist (none of Pacer's settings or secrets), and
in one of three confinements, chosen once at start-up (`Custody.mode`):

    "user"     as a separate unprivileged user (PACER_AGENT_USER; Pacer must be root to hand
               the turn over): it cannot read Pacer's process (/proc/<pid>/environ) nor any file
               of Pacer's that is not readable by others, and its working directory is its own.
    "sandbox"  in a bubblewrap sandbox (new PID, IPC and UTS namespaces; a read-only system, a
               fresh /tmp, and of the writable world only its own working directory and its
               home): it sees no other process, none of Pacer's files and no other session's
               worktree. Combined with "user" when both are configured ("user+sandbox").
    "none"     as Pacer's own user, with Pacer's processes made non-dumpable (`harden_process`)
               so /proc/<pid>/environ is closed to it; it can still read and write whatever
               Pacer's user can. Start-up says so in a warning.

    custody = Custody(mode="user", user=AgentUser.named("pacer-agent"), home=Path(...))
    argv = custody.command(agent_argv, workdir)      # the leash (and bwrap) around the agent
    env = custody.environment(os.environ, extra={"PACER_TURN_ID": "7"})
    custody.prepare(workdir)                         # made, owned by the agent, reachable
    end_unsupervised()                               # at start-up: agents whose supervisor died
"""

from __future__ import annotations

import ctypes
import logging
import os
import pwd
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.errors import ConfigError
from templates import error_text

log = logging.getLogger("pacer.custody")

LEASH = Path(__file__).resolve().with_name("leash.py")  # run as a script, by path: it imports nothing of Pacer's
MODES = ("none", "user", "sandbox", "user+sandbox")
# What an agent's environment may hold of Pacer's: the names a CLI and its toolchain need, and
# the agents' own credentials. Everything else — Pacer's settings, its secrets, the database URL,
# where the roster, triggers and workspaces are — stays behind.
AGENT_NAMES = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "SHELL", "COLORTERM", "NO_COLOR",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
    "DISABLE_AUTOUPDATER", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING",
})
AGENT_PREFIXES = ("LC_", "ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_")
# Never an agent's, even when PACER_AGENT_ENV names them.
PACER_PREFIXES = ("PACER_", "GITHUB_", "SLACK_", "DATABASE_URL")
SUPERVISOR = "PACER_SUPERVISOR"  # pid:start of the process supervising an agent, in its environment
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix")
RUNTIME_FILES = ("/run/systemd/resolve", "/run/resolvconf")  # where /etc/resolv.conf may point

PR_SET_DUMPABLE = 4
_libc = ctypes.CDLL(None, use_errno=True)


def harden_process() -> None:
    """Close this process to same-user readers: non-dumpable (its /proc/<pid>/environ, mem and
    fds are root's only), and files it creates private to its user."""
    if sys.platform == "linux" and _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        log.warning("could not make this process non-dumpable (errno %s)", ctypes.get_errno())
    os.umask(0o077)


def is_pacers(name: str) -> bool:
    return name.startswith(PACER_PREFIXES)


@dataclass(frozen=True)
class AgentUser:
    """The unprivileged user agents run as."""

    name: str
    uid: int
    gid: int
    home: str

    @classmethod
    def named(cls, name: str) -> AgentUser:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise ConfigError(error_text("custody/no_such_user", name=name)) from None
        if entry.pw_uid == 0:
            raise ConfigError(error_text("custody/root_agent", name=name))
        return cls(name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


@dataclass(frozen=True)
class Custody:
    mode: str = "none"
    user: AgentUser | None = None
    home: Path | None = None  # the agent's HOME (its CLI's login lives there); the user's own by default
    bwrap: str | None = None
    binds: tuple[str, ...] = ()  # more read-only paths the sandbox shows (an agent installed elsewhere)
    passthrough: frozenset[str] = field(default_factory=frozenset)  # names beyond AGENT_NAMES
    roots: tuple[Path, ...] = ()  # where Pacer makes agents' working directories (PACER_WORKDIR, PACER_WORKSPACES)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(error_text("custody/mode", value=self.mode, allowed=list(MODES)))
        if ("user" in self.mode) != (self.user is not None):
            raise ConfigError(error_text("custody/user_mode", mode=self.mode))
        if "sandbox" in self.mode and not self.bwrap:
            raise ConfigError(error_text("custody/no_bwrap"))
        leaked = sorted(n for n in self.passthrough if is_pacers(n))
        if leaked:
            raise ConfigError(error_text("custody/pacers_name", name=leaked[0]))

    @property
    def agent_home(self) -> Path | None:
        if self.home is not None:
            return self.home
        return Path(self.user.home) if self.user is not None else None

    def environment(self, environ: Mapping[str, str], extra: Mapping[str, str] = {}) -> dict[str, str]:
        """The agent's environment: the allowlisted names of `environ`, its own HOME and user,
        `extra`, and the mark that lets a later start-up find it should its supervisor die."""
        env = {k: v for k, v in environ.items() if self._passes(k)}
        home = self.agent_home
        if home is not None:
            env["HOME"] = str(home)
        if self.user is not None:
            env["USER"] = env["LOGNAME"] = self.user.name
        env[SUPERVISOR] = supervisor_mark(os.getpid())
        env.update(extra)
        return env

    def _passes(self, name: str) -> bool:
        if is_pacers(name):
            return False
        return name in AGENT_NAMES or name.startswith(AGENT_PREFIXES) or name in self.passthrough

    def command(
        self, argv: list[str], workdir: Path, *, grace_s: float = 3.0, prompt_fd: int | None = None
    ) -> list[str]:
        """`argv` under the leash (which kills `grace_s` after asking its agent to stop), and
        inside the sandbox when there is one; `prompt_fd` (an open descriptor of this process)
        becomes the agent's descriptor 3."""
        wrapped = self._sandbox(argv, workdir) if self.bwrap and "sandbox" in self.mode else argv
        given = ["--fd", str(prompt_fd)] if prompt_fd is not None else []
        if self.user is not None:
            given += ["--user", f"{self.user.uid}:{self.user.gid}"]
        return [
            sys.executable,
            "-I",
            "-S",
            str(LEASH),
            "--parent",
            str(os.getpid()),
            "--grace",
            f"{grace_s:g}",
            *given,
            "--",
            *wrapped,
        ]

    def popen_options(self) -> dict[str, Any]:
        """How the leash is started: in a session of its own (it drops to the agent's user itself)."""
        return {"start_new_session": True}

    def _sandbox(self, argv: list[str], workdir: Path) -> list[str]:
        assert self.bwrap is not None
        args = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try"]
        for path in SYSTEM_DIRS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
        ]  # before the binds: a bind under /tmp must stay seen
        for path in (*RUNTIME_FILES, *self.binds):
            args += ["--ro-bind-try", path, path]
        home = self.agent_home
        if home is not None:
            args += ["--bind", str(home), str(home)]
        args += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir), "--", *argv]
        return args

    def make_roots(self) -> None:
        """Make the missing directories down to each root, passable by the agent's user."""
        for root in self.roots:
            missing = [d for d in (root, *root.parents) if not d.exists()]
            for directory in reversed(missing):
                directory.mkdir(exist_ok=True)
                if self.user is not None:
                    directory.chmod(0o711)

    def prepare(self, workdir: Path) -> None:
        """The agent's working directory: made, and the agent's own (owned by it, private).
        Each directory above it inside one of `roots` gets the search bit for others (passing
        through is not listing); one outside them that the agent cannot pass is an error."""
        workdir.mkdir(parents=True, exist_ok=True)
        home = self.agent_home
        if home is not None and self.user is None:
            home.mkdir(parents=True, exist_ok=True)
        if self.user is None:
            return
        inside = [root.resolve() for root in self.roots]
        for directory in reversed(workdir.resolve().parents):
            mode = directory.stat().st_mode
            if mode & 0o001:
                continue
            if not any(directory == root or root in directory.parents for root in inside):
                raise PermissionError(
                    error_text("custody/unreachable", path=directory, user=self.user.name, workdir=workdir)
                )
            directory.chmod(mode | 0o001)
        if workdir.stat().st_uid == self.user.uid:
            return
        inner = list(os.scandir(workdir))
        if inner and all(entry.stat(follow_symlinks=False).st_uid == self.user.uid for entry in inner[:8]):
            os.chown(
                workdir, self.user.uid, self.user.gid
            )  # locked after its last turn (`release`): its contents are the agent's
        else:
            chown_tree(workdir, self.user.uid, self.user.gid)  # made by Pacer just now: a new clone, a new directory
        workdir.chmod(0o700)

    def release(self, workdir: Path) -> None:
        """After a turn: the working directory is locked to Pacer's user, so the agent of
        another session (the same agent user) cannot enter it while this one is not running."""
        if self.user is not None and workdir.is_dir() and not workdir.is_symlink():
            os.chown(workdir, os.getuid(), os.getgid(), follow_symlinks=False)
            workdir.chmod(0o700)


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """`root` and everything under it to `uid`, not following links (a link the agent planted
    must not make Pacer chown what it points to)."""
    os.chown(root, uid, gid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)


def sandbox_works(bwrap: str, options: Mapping[str, Any]) -> bool:
    """Whether bubblewrap can make its namespaces here (a container may forbid user namespaces)."""
    try:
        done = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--die-with-parent", "true"],
            capture_output=True,
            timeout=10,
            check=False,
            **options,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def choose(
    *,
    user: str | None,
    sandbox: str,
    home: str | None,
    binds: Iterable[str] = (),
    passthrough: Iterable[str] = (),
    roots: Iterable[str | Path] = (),
) -> Custody:
    """The custody the settings ask for: PACER_AGENT_USER (needs root, and root needs it),
    PACER_AGENT_SANDBOX `auto` (bubblewrap when it is installed and works), `bwrap` (required)
    or `off`."""
    agent = AgentUser.named(user) if user else None
    if agent is not None and os.geteuid() != 0:
        raise ConfigError(error_text("custody/needs_root", name=agent.name))
    if agent is None and os.geteuid() == 0:  # an agent as root could read and undo everything, sandbox or not
        raise ConfigError(error_text("custody/root_without_user"))
    found = shutil.which("bwrap")
    options = {"user": agent.uid, "group": agent.gid, "extra_groups": []} if agent is not None else {}
    usable = found is not None and sandbox != "off" and sandbox_works(found, options)
    if sandbox == "bwrap" and not usable:
        raise ConfigError(error_text("custody/bwrap_unusable", found=found))
    mode = "+".join(part for part, on in (("user", agent is not None), ("sandbox", usable)) if on) or "none"
    return Custody(
        mode=mode,
        user=agent,
        home=Path(home).resolve() if home else None,
        bwrap=found if usable else None,
        binds=tuple(binds),
        passthrough=frozenset(passthrough),
        roots=tuple(Path(r).resolve() for r in roots),
    )


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()[19].decode()


def supervisor_mark(pid: int) -> str:
    """`pid:start`: a pid alone is reused; with its start time it names one process."""
    return f"{pid}:{_start_time(pid)}"


def _alive(mark: str) -> bool:
    pid, _, start = mark.partition(":")
    return pid.isdigit() and _start_time(int(pid)) == start


def _marked(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read().split(b"\0")
    except OSError:
        return None
    prefix = SUPERVISOR.encode() + b"="
    return next((item[len(prefix):].decode(errors="replace") for item in environ if item.startswith(prefix)), None)


def end_unsupervised() -> list[int]:
    """SIGKILL every agent process on this machine whose supervising Pacer process is gone (the
    leash ends its agent when its parent dies; this is for what a killed leash left behind).
    Returns the pids ended."""
    ended = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        mark = _marked(int(name))
        if mark is None or _alive(mark):
            continue
        try:
            os.kill(int(name), signal.SIGKILL)
            ended.append(int(name))
        except (ProcessLookupError, PermissionError):
            pass
    if ended:
        log.warning(
            "ended %d agent process(es) whose supervisor had stopped: %s", len(ended), ", ".join(map(str, ended))
        )
    return ended


__all__ = ["AGENT_NAMES", "MODES", "AgentUser", "Custody", "choose", "chown_tree", "end_unsupervised", "harden_process",
           "sandbox_works", "supervisor_mark"]
