"""Workspaces: a git mirror per repository and a worktree per session, on its own branch.

    spaces = Workspaces(root, GitRemote("https://github.com/{repository}.git", token=...))
    space = spaces.open(session_id=42, repository="acme/api", title="Fix the flaky login test")
    space.path      # the runner's {workdir}: a checkout of the default branch
    space.branch    # pacer/42-fix-the-flaky-login-test

Later turns of the session reuse its worktree. The token reaches git only for the one command
that talks to the remote (fetch, push), as configuration passed in that command's environment
(GIT_CONFIG_COUNT/KEY/VALUE): never in a remote URL, never in the mirror's or the worktree's
config, never on a command line, never in the agent's environment (seed of this rule:
PRACTICES.md, "Agents and git").
"""

from __future__ import annotations

import base64
import logging
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.bounds import is_repository
from scheduler.errors import ConfigError
from templates import error_text

log = logging.getLogger("pacer.workspaces")

SLUG_CHARS = 40
GIT_TIMEOUT_SECONDS = 600


class WorkspaceError(Exception):
    """A git step failed; the message names the step and what git said (never the token)."""


@dataclass(frozen=True)
class GitRemote:
    """Where a repository is fetched from, and the credential that fetch and push may use."""

    template: str = "https://github.com/{repository}.git"
    token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if "{repository}" not in self.template or self.template.replace("{repository}", "").count("{"):
            raise ConfigError(error_text("workspaces/remote_template", template=self.template))

    def url(self, repository: str) -> str:
        return self.template.format(repository=repository)

    def credential_env(self, token: str | None = None) -> dict[str, str]:
        """Git configuration for one command, in its environment only: an Authorization header
        for HTTP remotes (GitHub accepts a token as the password of x-access-token). `token`
        (a GitHub App installation's) stands in for the remote's own."""
        token = token or self.token
        if not token:
            return {}
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader", "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}"}


@dataclass(frozen=True)
class Workspace:
    session_id: int
    repository: str
    path: Path
    branch: str
    created: bool  # False: an earlier turn's worktree, reused


def slug(title: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return words[:SLUG_CHARS].rstrip("-") or "session"


def branch_name(session_id: int, title: str) -> str:
    return f"pacer/{session_id}-{slug(title)}"


class Workspaces:
    def __init__(self, root: str | Path, remote: GitRemote, *, git: str = "git", max_bytes: int | None = None) -> None:
        self.root = Path(root)
        self.remote = remote
        self.git = git
        self.max_bytes = max_bytes  # what every workspace together may use (`runners.workspace.sweep` holds it)
        # One git writer per mirror at a time in this process: two clones, fetches or pushes on
        # one mirror would race for its directory and its ref locks.
        self._locks: dict[str, threading.RLock] = {}
        self._locks_lock = threading.Lock()

    def _mirror_lock(self, repository: str) -> threading.RLock:
        with self._locks_lock:
            return self._locks.setdefault(repository.lower(), threading.RLock())

    def mirror_path(self, repository: str) -> Path:
        return self.root / "mirrors" / f"{repository}.git"

    def worktree_path(self, session_id: int) -> Path:
        return self.root / "sessions" / f"session-{session_id}"

    def _run(self, args: Sequence[str], *, step: str, cwd: Path | None = None, remote: bool = False, token: str | None = None) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_CONFIG_")}
        env["GIT_TERMINAL_PROMPT"] = "0"  # never wait for a password on a terminal nobody watches
        if remote:
            env.update(self.remote.credential_env(token))
        done = subprocess.run([self.git, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=GIT_TIMEOUT_SECONDS, check=False)
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            said = self._redact([line for line in lines if line.startswith(("fatal:", "error:"))][:1] or lines[-1:] or [""], token)
            raise WorkspaceError(error_text("workspaces/git_failed", step=step, code=done.returncode, said=said))
        return done.stdout

    def _redact(self, lines: Sequence[str], token: str | None = None) -> str:
        text = " ".join(lines)
        for secret in (self.remote.token, token):
            text = text.replace(secret, "***") if secret else text
        return text

    def sync(self, repository: str, *, token: str | None = None) -> Path:
        """The repository's mirror, cloned the first time and fetched after (with `token`, when
        given, for those two commands)."""
        if not is_repository(repository):
            raise WorkspaceError(error_text("workspaces/not_a_repository", repository=repository))
        with self._mirror_lock(repository):
            return self._sync(repository, token)

    def _sync(self, repository: str, token: str | None) -> Path:
        mirror = self.mirror_path(repository)
        if not (mirror / "HEAD").exists():
            mirror.parent.mkdir(parents=True, exist_ok=True)
            self._run(["clone", "--bare", self.remote.url(repository), str(mirror)], step="clone", remote=True, token=token)
            # Remote-tracking refs, so a session's branch can track the one it started from.
            self._run(["--git-dir", str(mirror), "config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"], step="config")
        # Into origin/*, never into local branches: a session's branch is checked out in its
        # worktree, and git refuses to move a branch a worktree has checked out.
        self._run(["--git-dir", str(mirror), "fetch", "--prune", "origin"], step="fetch", remote=True, token=token)
        return mirror

    def open(self, *, session_id: int, repository: str, title: str, base: str | None = None, token: str | None = None) -> Workspace:
        """The session's worktree: reused when an earlier turn made it, else made from `base`
        (a pull request's branch) or the default branch, on the session's own branch."""
        path = self.worktree_path(session_id)
        if (path / ".git").exists():
            branch = self._run(["rev-parse", "--abbrev-ref", "HEAD"], step="rev-parse", cwd=path).strip()
            return Workspace(session_id, repository, path, branch, created=False)
        with self._mirror_lock(repository):
            return self._make(session_id, repository, title, base, token)

    def _make(self, session_id: int, repository: str, title: str, base: str | None, token: str | None) -> Workspace:
        path = self.worktree_path(session_id)
        mirror = self.mirror_path(repository)
        self.sync(repository, token=token)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._run(["--git-dir", str(mirror), "worktree", "prune"], step="worktree prune")  # a worktree removed by hand
        kept = self._session_branch(mirror, session_id)
        if kept is not None:
            # Its worktree was removed (archive, TTL) and a new turn came: its branch, with its
            # commits and its upstream, is still in the mirror.
            self._run(["--git-dir", str(mirror), "worktree", "add", str(path), kept], step="worktree add")
            log.info("session #%s works in %s on %s again", session_id, path, kept)
            return Workspace(session_id, repository, path, kept, created=True)
        branch = branch_name(session_id, title)
        start = "origin/" + (base or self._run(["--git-dir", str(mirror), "symbolic-ref", "--short", "HEAD"], step="default branch").strip())
        self._run(["--git-dir", str(mirror), "worktree", "add", "-b", branch, str(path), start], step="worktree add")
        self._run(["branch", f"--set-upstream-to={start}"], step="upstream", cwd=path)
        log.info("session #%s works in %s on %s (from %s)", session_id, path, branch, start)
        return Workspace(session_id, repository, path, branch, created=True)

    def _session_branch(self, mirror: Path, session_id: int) -> str | None:
        """The branch an earlier worktree of the session made, if the mirror has one."""
        found = self._run(["--git-dir", str(mirror), "branch", "--list", "--format=%(refname:short)", f"pacer/{session_id}-*"],
                          step="branch list")
        names = found.split()
        return names[0] if names else None

    def new_commits(self, space: Workspace) -> int:
        """Commits on the session's branch that its upstream lacks: the branch it started from
        until its first push, its own copy on the remote after. Zero: nothing to push."""
        return int(self._run(["rev-list", "--count", "@{upstream}..HEAD"], step="rev-list", cwd=space.path).strip() or 0)

    def push(self, space: Workspace, *, token: str | None = None) -> None:
        """Push the session's branch. A rejected push (the branch moved on the remote) raises
        with git's words; it is reported, never retried blindly or forced."""
        with self._mirror_lock(space.repository):
            self._run(["push", "origin", f"{space.branch}:refs/heads/{space.branch}"], step="push", cwd=space.path, remote=True, token=token)
            self._run(["fetch", "origin", f"+refs/heads/{space.branch}:refs/remotes/origin/{space.branch}"], step="fetch", cwd=space.path,
                      remote=True, token=token)
            self._run(["branch", f"--set-upstream-to=origin/{space.branch}"], step="upstream", cwd=space.path)

    def remove(self, session_id: int, repository: str) -> bool:
        """Remove the session's worktree (its branch stays in the mirror); False when none."""
        path = self.worktree_path(session_id)
        if not path.exists():
            return False
        mirror = self.mirror_path(repository)
        try:
            self._run(["--git-dir", str(mirror), "worktree", "remove", "--force", str(path)], step="worktree remove")
        except WorkspaceError:
            shutil.rmtree(path, ignore_errors=True)  # a worktree whose mirror is gone is only files
            self._run(["--git-dir", str(mirror), "worktree", "prune"], step="worktree prune")
        return True

    def worktree_bytes(self, session_id: int) -> int:
        return _size(self.worktree_path(session_id))

    def usage(self) -> Mapping[str, int]:
        """Bytes on disk: every mirror together, and each session's worktree."""
        found = {"mirrors": _size(self.root / "mirrors")}
        sessions = self.root / "sessions"
        if sessions.exists():
            for child in sorted(sessions.iterdir()):
                found[child.name] = _size(child)
        return found


def _size(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
