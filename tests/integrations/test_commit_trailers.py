"""Pacer's trailers on the commits it pushes (integrations/trailers.py), with real git: a bare
repository on disk is the remote, the session's worktree commits as an agent would, and what
reaches the remote is read back with git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from integrations.trailers import CommitTrailers, trailers_of
from integrations.workspaces import GitRemote, Workspace, WorkspaceError, Workspaces
from tests.integrations.test_workspaces import bare_remote, git

LINK = "https://github.com/acme/api/issues/7#issuecomment-9001"
COAUTHOR = "alice <1234+alice@users.noreply.github.com>"
TRAILERS = trailers_of(42, LINK, COAUTHOR)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return bare_remote(tmp_path)


def _commit(space: Workspace, name: str, message: str, *, date: str = "2026-01-02T03:04:05+00:00") -> str:
    (space.path / name).write_text(f"{name}\n")
    git("add", name, cwd=space.path)
    git("-c", "user.name=Agent", "-c", "user.email=agent@example.com", "commit", "-q", "-m", message,
        "--date", date, cwd=space.path)
    return git("rev-parse", "HEAD", cwd=space.path).strip()


def _publish(spaces: Workspaces, space: Workspace, trailers: CommitTrailers) -> int:
    """What Publisher does: collect, count, sign, push, remember."""
    spaces.collect(space)
    pending = trailers.pending(space)
    if pending:
        outgoing = trailers.sign(space, TRAILERS)
        spaces.push(space, ref=outgoing.ref)
        trailers.pushed(space, outgoing)
    return pending


def _remote_log(remote: Path, branch: str, fmt: str) -> list[str]:
    found = git("--git-dir", str(remote / "acme" / "api.git"), "log", f"--format={fmt}", branch).split("\x00")
    return [entry.strip() for entry in found if entry.strip()]


def _setup(tmp_path: Path, remote: Path) -> tuple[Workspaces, Workspace, CommitTrailers]:
    spaces = Workspaces(tmp_path / "ws", GitRemote(f"file://{remote}/{{repository}}.git"))
    space = spaces.open(session_id=42, repository="acme/api", title="Fix login")
    return spaces, space, CommitTrailers(spaces)


def test_each_pushed_commit_carries_the_trailers_and_keeps_its_tree_author_and_date(
    tmp_path: Path, remote: Path
) -> None:
    spaces, space, trailers = _setup(tmp_path, remote)
    assert _publish(spaces, space, trailers) == 0  # no commit, nothing to push
    agent = [_commit(space, "a.txt", "Add a\n\nBecause.\n---\nnot a divider"), _commit(space, "b.txt", "Add b")]
    assert _publish(spaces, space, trailers) == 2
    messages = _remote_log(remote, space.branch, "%B%x00")
    assert messages[0].strip() == f"Add b\n\nPacer-Session: 42\nPacer-Link: {LINK}\nCo-authored-by: {COAUTHOR}"
    assert messages[1].strip().endswith(f"---\nnot a divider\n\nPacer-Session: 42\nPacer-Link: {LINK}\n"
                                        f"Co-authored-by: {COAUTHOR}")
    bare = str(remote / "acme" / "api.git")
    for original, pushed in zip(reversed(agent), git("--git-dir", bare, "rev-list", "-2", space.branch).split(),
                                strict=True):
        assert original != pushed
        assert git("rev-parse", f"{original}^{{tree}}", cwd=space.path) == git("--git-dir", bare, "rev-parse",
                                                                                f"{pushed}^{{tree}}")
        assert git("log", "-1", "--format=%an <%ae> %aI %cn", original, cwd=space.path) == git(
            "--git-dir", bare, "log", "-1", "--format=%an <%ae> %aI %cn", pushed)
    assert _remote_log(remote, space.branch, "%s%x00")[-1].strip() == "first"


def test_the_next_turn_goes_on_top_and_the_branch_only_moves_forward(tmp_path: Path, remote: Path) -> None:
    spaces, space, trailers = _setup(tmp_path, remote)
    _commit(space, "a.txt", "Turn 1")
    assert _publish(spaces, space, trailers) == 1
    bare = str(remote / "acme" / "api.git")
    first = git("--git-dir", bare, "rev-parse", space.branch).strip()
    assert _publish(spaces, space, trailers) == 0  # the agent's pushed commit is not counted again
    _commit(space, "b.txt", "Turn 2")
    assert _publish(spaces, space, trailers) == 1  # a rejected non-fast-forward push would raise here
    assert git("--git-dir", bare, "rev-parse", f"{space.branch}^").strip() == first
    assert [m.splitlines()[0] for m in _remote_log(remote, space.branch, "%B%x00")] == [
        "Turn 2", "Turn 1", "first"
    ]


def test_a_commit_that_has_the_trailers_is_pushed_as_it_is(tmp_path: Path, remote: Path) -> None:
    spaces, space, trailers = _setup(tmp_path, remote)
    message = f"Done\n\nPacer-Session: 42\nPacer-Link: {LINK}\nCo-authored-by: {COAUTHOR}"
    agent = _commit(space, "a.txt", message)
    _publish(spaces, space, trailers)
    assert git("--git-dir", str(remote / "acme" / "api.git"), "rev-parse", space.branch).strip() == agent


def test_a_branch_moved_on_the_remote_still_rejects_the_push_and_it_is_tried_again(
    tmp_path: Path, remote: Path
) -> None:
    spaces, space, trailers = _setup(tmp_path, remote)
    _commit(space, "a.txt", "Turn 1")
    _publish(spaces, space, trailers)
    # Someone else pushes to the session's branch.
    other = tmp_path / "other"
    git("clone", "-q", "-b", space.branch, str(remote / "acme" / "api.git"), str(other))
    (other / "theirs.txt").write_text("theirs\n")
    git("add", ".", cwd=other)
    git("commit", "-q", "-m", "Theirs", cwd=other)
    git("push", "-q", "origin", space.branch, cwd=other)
    _commit(space, "b.txt", "Turn 2")
    spaces.sync("acme/api")
    with pytest.raises(WorkspaceError, match="push"):
        _publish(spaces, space, trailers)
    # Nothing of Turn 2 counted as pushed: after the branch is put back, it goes out.
    git("push", "-q", "--force", "origin", "HEAD~1:" + space.branch, cwd=other)
    spaces.sync("acme/api")
    assert _publish(spaces, space, trailers) == 1
    assert _remote_log(remote, space.branch, "%s%x00")[0].strip() == "Turn 2"


def test_a_value_that_is_not_one_clean_line_is_left_out() -> None:
    assert trailers_of(7, None, None) == [("Pacer-Session", "7")]
    assert trailers_of(7, "https://x\nInjected: yes", "bob <b@x>") == [
        ("Pacer-Session", "7"), ("Co-authored-by", "bob <b@x>")
    ]


def test_a_signature_over_the_old_message_is_dropped(tmp_path: Path, remote: Path) -> None:
    spaces, space, trailers = _setup(tmp_path, remote)
    _commit(space, "a.txt", "Signed work")
    raw = git("cat-file", "commit", "HEAD", cwd=space.path)
    head, _, message = raw.partition("\n\n")
    signature = "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----"
    signed = subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--stdin"], cwd=space.path, check=True,
                            input=f"{head}\n{signature}\n\n{message}", capture_output=True, text=True).stdout.strip()
    git("update-ref", f"refs/heads/{space.branch}", signed, cwd=space.path)
    assert "gpgsig" in git("cat-file", "commit", "HEAD", cwd=space.path)
    assert _publish(spaces, space, trailers) == 1
    pushed = git("--git-dir", str(remote / "acme" / "api.git"), "cat-file", "commit", space.branch)
    assert "gpgsig" not in pushed and "BEGIN PGP" not in pushed and "Pacer-Session: 42" in pushed
    assert pushed.startswith(head.split("\n")[0])  # the same tree


def test_a_commit_already_on_another_branch_of_the_remote_is_pushed_as_it_is(tmp_path: Path, remote: Path) -> None:
    """The agent merged another branch of the remote into its own: that branch's commits are not
    the session's, and are already the remote's; written again with the trailers they would be
    copies, and the pull request would show their changes as its own."""
    other = tmp_path / "other"
    git("clone", "-q", str(remote / "acme" / "api.git"), str(other))
    git("checkout", "-q", "-b", "feature", cwd=other)
    (other / "theirs.txt").write_text("theirs\n")
    git("add", ".", cwd=other)
    git("-c", "user.name=Them", "-c", "user.email=them@example.com", "commit", "-q", "-m", "Theirs", cwd=other)
    git("push", "-q", "origin", "feature", cwd=other)
    theirs = git("rev-parse", "HEAD", cwd=other).strip()
    spaces, space, trailers = _setup(tmp_path, remote)
    _commit(space, "a.txt", "Mine")
    git("-c", "user.name=Agent", "-c", "user.email=agent@example.com", "merge", "-q", "--no-edit",
        "origin/feature", cwd=space.path)
    assert _publish(spaces, space, trailers) == 2  # its own commit and its merge
    bare = str(remote / "acme" / "api.git")
    assert theirs in git("--git-dir", bare, "rev-list", space.branch).split()
    assert [m.splitlines()[0] for m in _remote_log(remote, space.branch, "%B%x00") if "Pacer-Session: 42" in m] == [
        "Merge remote-tracking branch 'origin/feature' into pacer/42-fix-login", "Mine"
    ]
