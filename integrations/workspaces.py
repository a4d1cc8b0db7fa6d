"""Workspaces: a git mirror per repository, Pacer's own, and a clone of it per session, the agent's.

    spaces = Workspaces(root, GitRemote("https://github.com/{repository}.git", token=...))
    space = spaces.open(session_id=42, repository="acme/api", title="Fix the flaky login test")
    space.path      # the runner's {workdir}: the session's own repository, on its own branch
    space.branch    # pacer/42-fix-the-flaky-login-test
    spaces.new_commits(space); spaces.push(space)   # after a turn: what it committed, to the remote

Later turns of the session reuse its working tree. Everything in it — files, `.git/config`,
hooks, the branch it has checked out — is the agent's and therefore hostile, so Pacer never runs
git in it once the agent has had it. After a turn Pacer fetches the session's branch, by the name
Pacer gave it, out of the session's repository into its own mirror (`refs/sessions/<id>/heads/`):
the one operation git documents as safe against an untrusted repository (`git upload-pack` avoids
the served repository's dangerous configuration and hooks), with every object's hash checked as
it arrives. Counting and pushing then run in the mirror, to the remote's own URL. The agent cannot
write the mirror (it is Pacer's; see custody.py), so nothing one session plants reaches the next.

Every git command Pacer runs gets a minimal environment (PATH, a HOME with no configuration, no
system or global configuration, no terminal prompt) and configuration that turns off what a
repository could make git execute: hooks, fsmonitor, credential helpers, pagers, the `ext::`
transport. The token reaches git only for the one command that talks to the remote (fetch, push),
as an `http.extraHeader` in that command's environment (GIT_CONFIG_COUNT/KEY/VALUE): never in a
URL, never in a config file, never on a command line, never in the agent's environment
(PRACTICES.md, "Agents and git").
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
# What a repository's configuration could make Pacer's git run, turned off on every command.
HARDENED = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("credential.helper", ""),
    ("core.pager", "cat"),
    ("core.askPass", ""),
    ("protocol.ext.allow", "never"),
    ("gc.auto", "0"),  # a session's repository was made from the mirror's objects: they stay
    ("maintenance.auto", "false"),
    ("advice.detachedHead", "false"),
)
PASSED_TO_GIT = (
    "PATH",
    "LANG",
    "SSH_AUTH_SOCK",
    "GIT_SSH_COMMAND",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
)
# upload-pack of a session's repository: it is the agent's, so its owner may not be Pacer's user.
UPLOAD_PACK = "git -c safe.directory=* -c core.hooksPath=/dev/null upload-pack"


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

    def credential_config(self, token: str | None = None) -> list[tuple[str, str]]:
        """An Authorization header for HTTP remotes (GitHub accepts a token as the password of
        x-access-token). `token` (a GitHub App installation's) stands in for the remote's own."""
        token = token or self.token
        if not token:
            return []
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        return [("http.extraHeader", f"Authorization: Basic {basic}")]


@dataclass(frozen=True)
class Workspace:
    session_id: int
    repository: str
    path: Path
    branch: str
    created: bool  # False: an earlier turn's working tree, reused
    start: str = ""  # the mirror's ref the branch started from: what "new commits" are counted against


def slug(title: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return words[:SLUG_CHARS].rstrip("-") or "session"


def branch_name(session_id: int, title: str) -> str:
    return f"pacer/{session_id}-{slug(title)}"


def git_environment(environ: Mapping[str, str], home: Path, config: Sequence[tuple[str, str]]) -> dict[str, str]:
    """What one of Pacer's git commands runs with: a few names of `environ`, no configuration
    but Pacer's own (`HARDENED`, then `config`), nothing that prompts."""
    env = {k: environ[k] for k in PASSED_TO_GIT if k in environ}
    env.setdefault("PATH", os.defpath)
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="",
        SSH_ASKPASS="",
        LC_ALL="C",
    )
    pairs = [*HARDENED, *config]
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env


class Workspaces:
    def __init__(self, root: str | Path, remote: GitRemote, *, git: str = "git", max_bytes: int | None = None) -> None:
        self.root = Path(root).resolve()
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
        return self.root / "mirrors" / f"{repository.lower()}.git"

    def worktree_path(self, session_id: int) -> Path:
        return self.root / "sessions" / f"session-{session_id}"

    def _run(
        self, args: Sequence[str], *, step: str, cwd: Path | None = None, remote: bool = False, token: str | None = None
    ) -> str:
        home = self.root / "git-home"
        home.mkdir(parents=True, exist_ok=True)
        env = git_environment(os.environ, home, self.remote.credential_config(token) if remote else [])
        done = subprocess.run(
            [self.git, *args],
            cwd=cwd or self.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            said = self._redact(
                [line for line in lines if line.startswith(("fatal:", "error:"))][:1] or lines[-1:] or [""], token
            )
            raise WorkspaceError(error_text("workspaces/git_failed", step=step, code=done.returncode, said=said))
        return done.stdout

    def _in_mirror(self, repository: str, *args: str, step: str, remote: bool = False, token: str | None = None) -> str:
        return self._run(["--git-dir", str(self.mirror_path(repository)), *args], step=step, remote=remote, token=token)

    def _redact(self, lines: Sequence[str], token: str | None = None) -> str:
        text = " ".join(lines)
        for secret in (self.remote.token, token):
            text = text.replace(secret, "***") if secret else text
        return text

    def sync(self, repository: str, *, token: str | None = None) -> Path:
        """The repository's mirror, cloned the first time and fetched after (with `token`, when
        given, for those two commands). The remote's branches land in refs/remotes/origin/*."""
        if not is_repository(repository):
            raise WorkspaceError(error_text("workspaces/not_a_repository", repository=repository))
        with self._mirror_lock(repository):
            mirror = self.mirror_path(repository)
            if not (mirror / "HEAD").exists():
                mirror.parent.mkdir(parents=True, exist_ok=True)
                self._run(
                    ["clone", "--bare", "--", self.remote.url(repository), str(mirror)],
                    step="clone",
                    remote=True,
                    token=token,
                )
            # To the remote's own URL, whatever a config says: the refspec is Pacer's too.
            self._in_mirror(
                repository,
                "fetch",
                "--prune",
                "--no-tags",
                self.remote.url(repository),
                "+refs/heads/*:refs/remotes/origin/*",
                step="fetch",
                remote=True,
                token=token,
            )
            return mirror

    def open(
        self, *, session_id: int, repository: str, title: str, base: str | None = None, token: str | None = None
    ) -> Workspace:
        """The session's working tree: reused when an earlier turn made it, else made from the
        session's branch if the mirror has one, else from `base` (a pull request's branch) or the
        default branch, on a new branch of the session's own."""
        path = self.worktree_path(session_id)
        with self._mirror_lock(repository):
            reuse = (path / ".git").is_dir() and not (path / ".git").is_symlink()
            if not reuse or not (self.mirror_path(repository) / "HEAD").exists():
                self.sync(repository, token=token)
            default = self._in_mirror(repository, "symbolic-ref", "--short", "HEAD", step="default branch").strip()
            start = f"refs/remotes/origin/{base or default}"
            kept = self._session_branch(repository, session_id)
            branch = kept[0] if kept else branch_name(session_id, title)
            if reuse:
                return Workspace(session_id, repository, path, branch, created=False, start=start)
            if self.remove(session_id, repository):  # a worktree of the mirror an earlier layout made, or a broken tree
                self._in_mirror(repository, "worktree", "prune", step="worktree prune")
            if kept is None:  # the mirror is what remembers the branch Pacer gave the session
                self._in_mirror(
                    repository, "update-ref", f"refs/sessions/{session_id}/heads/{branch}", start, step="update-ref"
                )
            self._make(repository, path, branch, kept[1] if kept else start, start)
        log.info("session #%s works in %s on %s (from %s)", session_id, path, branch, "its branch" if kept else start)
        return Workspace(session_id, repository, path, branch, created=True, start=start)

    def _make(self, repository: str, path: Path, branch: str, source: str, start: str) -> None:
        """A new repository at `path` holding the remote's branches and `branch` at `source`,
        checked out. Built beside it and renamed into place, so a crash leaves no half-made tree."""
        building = path.with_name(f".{path.name}.new")
        shutil.rmtree(building, ignore_errors=True)
        building.parent.mkdir(parents=True, exist_ok=True)
        self._run(["init", "-q", str(building)], step="init")
        refspecs = ["+refs/remotes/origin/*:refs/remotes/origin/*", f"+{source}:refs/heads/{branch}"]
        self._run(
            ["fetch", "-q", "--no-tags", str(self.mirror_path(repository)), *refspecs],
            step="fetch from the mirror",
            cwd=building,
        )
        self._run(["checkout", "-q", branch], step="checkout", cwd=building)
        upstream = start.removeprefix("refs/remotes/origin/")
        for key, value in (
            ("remote.origin.url", self.remote.url(repository)),
            ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
            (f"branch.{branch}.remote", "origin"),
            (f"branch.{branch}.merge", f"refs/heads/{upstream}"),
        ):
            self._run(["config", key, value], step="config", cwd=building)
        os.rename(building, path)

    def _session_branch(self, repository: str, session_id: int) -> tuple[str, str] | None:
        """The branch Pacer gave the session and the mirror's ref holding it, if the mirror has
        one: collected after an earlier turn, pushed to the remote, or made by an earlier layout."""
        found = self._in_mirror(
            repository,
            "for-each-ref",
            "--format=%(refname)",
            f"refs/sessions/{session_id}/heads/",
            f"refs/remotes/origin/pacer/{session_id}-*",
            f"refs/heads/pacer/{session_id}-*",
            step="branch list",
        )
        refs = found.split()
        for prefix in (f"refs/sessions/{session_id}/heads/", "refs/remotes/origin/", "refs/heads/"):
            for ref in refs:
                if ref.startswith(prefix):
                    return ref[len(prefix):], ref
        return None

    def collect(self, space: Workspace) -> str:
        """Fetch the session's branch, by the name Pacer gave it, from its working tree into the
        mirror; the ref it landed in. Refused when the working tree's repository borrows objects
        from elsewhere (an agent could point it at another repository's)."""
        dot_git = space.path / ".git"
        for checked in (dot_git, dot_git / "objects"):
            if checked.is_symlink() or not checked.is_dir():
                raise WorkspaceError(
                    error_text("workspaces/tampered", path=checked, what="is not a directory of its own")
                )
        for borrowed in ("alternates", "http-alternates"):
            if (dot_git / "objects" / "info" / borrowed).exists():
                raise WorkspaceError(
                    error_text(
                        "workspaces/tampered", path=dot_git / "objects" / "info" / borrowed, what="borrows objects"
                    )
                )
        ref = f"refs/sessions/{space.session_id}/heads/{space.branch}"
        with self._mirror_lock(space.repository):
            self._in_mirror(space.repository, "fetch", "-q", "--no-tags", f"--upload-pack={UPLOAD_PACK}", str(dot_git),
                            f"+refs/heads/{space.branch}:{ref}", step="collect the session's branch")
        return ref

    def new_commits(self, space: Workspace) -> int:
        """Commits on the session's branch that the remote lacks: its own copy there once pushed,
        the branch it started from until then. Zero: nothing to push."""
        ref = self.collect(space)
        pushed = f"refs/remotes/origin/{space.branch}"
        has_pushed = self._in_mirror(
            space.repository, "for-each-ref", "--format=%(refname)", pushed, step="branch list"
        ).strip()
        against = pushed if has_pushed else space.start
        return int(
            self._in_mirror(space.repository, "rev-list", "--count", f"{against}..{ref}", step="rev-list").strip() or 0
        )

    def push(self, space: Workspace, *, token: str | None = None, ref: str | None = None) -> None:
        """Push the session's branch, as collected (or `ref`, its commits with Pacer's trailers), from
        the mirror. A rejected push (the branch moved on the remote) raises with git's words; it is
        reported, never retried blindly or forced."""
        ref = ref or f"refs/sessions/{space.session_id}/heads/{space.branch}"
        with self._mirror_lock(space.repository):
            self._in_mirror(
                space.repository,
                "push",
                "--no-verify",
                "--",
                self.remote.url(space.repository),
                f"{ref}:refs/heads/{space.branch}",
                step="push",
                remote=True,
                token=token,
            )
            self._in_mirror(
                space.repository, "update-ref", f"refs/remotes/origin/{space.branch}", ref, step="update-ref"
            )

    def remove(self, session_id: int, repository: str) -> bool:
        """Remove the session's working tree (its branch stays in the mirror); False when none."""
        path = self.worktree_path(session_id)
        if not path.exists() and not path.is_symlink():
            return False
        if path.is_symlink():
            path.unlink()
        else:
            shutil.rmtree(path, ignore_errors=True)
        return True

    def worktree_bytes(self, session_id: int) -> int:
        return _size(self.worktree_path(session_id))

    def usage(self) -> Mapping[str, int]:
        """Bytes on disk: every mirror together, and each session's working tree."""
        found = {"mirrors": _size(self.root / "mirrors")}
        sessions = self.root / "sessions"
        if sessions.exists():
            for child in sorted(sessions.iterdir()):
                if not child.name.startswith("."):
                    found[child.name] = _size(child)
        return found


def _size(path: Path) -> int:
    if not path.exists() or path.is_symlink():
        return 0
    total = 0
    for dirpath, _dirnames, filenames in os.walk(path):  # never follows a link the agent planted
        for name in filenames:
            try:
                info = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            total += info.st_size if not os.path.islink(os.path.join(dirpath, name)) else 0
    return total
