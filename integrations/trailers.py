"""Pacer's trailers on every commit it pushes: which session made it, where to read about it, and
who asked for it (issue 31, P19 item 6).

    Pacer-Session: 42
    Pacer-Link: https://github.com/acme/api/issues/7#issuecomment-9001
    Co-authored-by: alice <1234+alice@users.noreply.github.com>

The agent's commits are the agent's, in a working tree Pacer never runs git in (see workspaces.py),
so the trailers are written in Pacer's own mirror, on the way out: each commit of the session's
branch that is not yet on the remote is written again there with the trailers added to its
message (`git interpret-trailers`, adding a line only where the same is not there already) and its
parents mapped to their rewritten selves; the tree, author, committer and dates stay as they were,
and a signature, no longer matching, is dropped. The rewritten branch is what is pushed.

Two refs per session remember the last push: `source/<branch>`, the agent's commit that was
pushed, and `signed/<branch>`, what it became. The next turn's commits are rewritten on top of
`signed/<branch>`, so the remote's branch only ever moves forward; a remote branch someone else
moved still rejects the push, as it would without the trailers. Both move only after the remote
took the push, so a rejected push is tried again, whole, after the next turn.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from integrations.workspaces import GIT_TIMEOUT_SECONDS, Workspace, WorkspaceError, Workspaces, git_environment
from templates import error_text

DROPPED = (b"gpgsig", b"gpgsig-sha256")  # signatures over the old message
TRAILER_VALUE = re.compile(r"[^\x00-\x1f\x7f]+")  # one line, no control characters


@dataclass(frozen=True)
class Outgoing:
    """What `sign` made: the ref to push, and the agent's commit it stands for."""

    ref: str
    source: str  # the agent's tip, by object name
    tip: str  # the rewritten tip


class CommitTrailers:
    """Counts, rewrites and records a session's outgoing commits in the repository's mirror."""

    def __init__(self, spaces: Workspaces) -> None:
        self.spaces = spaces

    def pending(self, space: Workspace) -> int:
        """The session's collected commits not yet pushed: zero, nothing to push. (Counted against
        the agent's own last pushed commit, since the remote holds rewritten ones.)"""
        return len(self._outgoing(space))

    def sign(self, space: Workspace, trailers: Sequence[tuple[str, str]]) -> Outgoing:
        """Write the pending commits again with `trailers`; the ref holding the rewritten branch."""
        commits = self._outgoing(space)
        source = self._sha(space, self._agent(space)) or ""
        mapped: dict[str, str] = {}
        last, signed = self._sha(space, self._ref(space, "source")), self._sha(space, self._ref(space, "signed"))
        if last and signed:
            mapped[last] = signed
        for commit in commits:
            mapped[commit] = self._rewrite(space, commit, mapped, trailers)
        tip = mapped.get(source, source)
        ref = self._ref(space, "outgoing")
        self._git(space, "update-ref", ref, tip, step="update-ref")
        return Outgoing(ref, source, tip)

    def pushed(self, space: Workspace, outgoing: Outgoing) -> None:
        """The remote took `outgoing`: the next turn's commits go on top of it."""
        self._git(space, "update-ref", self._ref(space, "source"), outgoing.source, step="update-ref")
        self._git(space, "update-ref", self._ref(space, "signed"), outgoing.tip, step="update-ref")

    def _outgoing(self, space: Workspace) -> list[str]:
        exclude = [r for r in (space.start, f"refs/remotes/origin/{space.branch}", self._ref(space, "source"))
                   if self._sha(space, r)]
        # A commit on any branch of the remote (one the agent merged) is the remote's already: not rewritten.
        listed = self._git(space, "rev-list", "--reverse", "--topo-order", self._agent(space), "--not", *exclude,
                           "--remotes=origin", step="rev-list")
        return listed.decode().split()

    def _rewrite(
        self, space: Workspace, commit: str, mapped: dict[str, str], trailers: Sequence[tuple[str, str]]
    ) -> str:
        raw = self._git(space, "cat-file", "commit", commit, step="cat-file")
        head, _, message = raw.partition(b"\n\n")
        lines: list[bytes] = []
        dropping = False
        for line in head.split(b"\n"):
            if line.startswith(b" ") and dropping:  # a dropped header's continuation
                continue
            dropping = line.split(b" ", 1)[0] in DROPPED
            if dropping:
                continue
            if line.startswith(b"parent "):
                parent = line[7:].decode()
                line = b"parent " + mapped.get(parent, parent).encode()
            lines.append(line)
        args = ["interpret-trailers", "--no-divider", "--if-exists", "addIfDifferent"]
        for key, value in trailers:
            args += ["--trailer", f"{key}: {value}"]
        body = message if message.endswith(b"\n") else message + b"\n"
        signed = self._git(space, *args, step="interpret-trailers", stdin=body)
        rewritten = b"\n".join(lines) + b"\n\n" + signed
        if rewritten == raw:
            return commit
        return self._git(space, "hash-object", "-t", "commit", "-w", "--stdin", step="hash-object",
                         stdin=rewritten).decode().strip()

    def _agent(self, space: Workspace) -> str:
        return f"refs/sessions/{space.session_id}/heads/{space.branch}"

    def _ref(self, space: Workspace, kind: str) -> str:
        return f"refs/sessions/{space.session_id}/{kind}/{space.branch}"

    def _sha(self, space: Workspace, ref: str) -> str | None:
        try:
            return self._git(space, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", step="rev-parse",
                             ).decode().strip() or None
        except WorkspaceError:
            return None

    def _git(self, space: Workspace, *args: str, step: str, stdin: bytes | None = None) -> bytes:
        """A git command in the mirror: the hardened environment workspaces.py gives every one."""
        home = self.spaces.root / "git-home"
        home.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [self.spaces.git, "--git-dir", str(self.spaces.mirror_path(space.repository)), *args],
            cwd=self.spaces.root, env=git_environment(os.environ, home, []), input=stdin, capture_output=True,
            timeout=GIT_TIMEOUT_SECONDS, check=False,
        )
        if done.returncode != 0:
            said = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise WorkspaceError(error_text("workspaces/git_failed", step=step, code=done.returncode, said=said[0]))
        return done.stdout


def trailers_of(session_id: int, link: str | None, coauthor: str | None) -> list[tuple[str, str]]:
    """The trailers of a session's commits; a value that is not one clean line is left out."""
    found = [("Pacer-Session", str(session_id)), ("Pacer-Link", link or ""), ("Co-authored-by", coauthor or "")]
    return [(key, value) for key, value in found if value and TRAILER_VALUE.fullmatch(value)]
