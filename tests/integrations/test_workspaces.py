"""Workspaces with real git: a bare repository on disk is the remote (file://), a mirror per
repository and a worktree per session on its own branch; the token never lands in a config."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from integrations.workspaces import GitRemote, WorkspaceError, Workspaces, branch_name, slug

TOKEN = "ghs_sekret_token_123"


def git(*args: str, cwd: Path | None = None) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": "/usr/bin:/bin",
        "HOME": str(cwd or "/tmp"),
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def bare_remote(root: Path) -> Path:
    """`root`/remotes/acme/api.git: a bare repository with one commit on main; its remotes folder."""
    work = root / "seed"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    (work / "README.md").write_text("hello\n")
    git("add", ".", cwd=work)
    git("commit", "-q", "-m", "first", cwd=work)
    bare = root / "remotes" / "acme" / "api.git"
    bare.parent.mkdir(parents=True)
    git("clone", "-q", "--bare", str(work), str(bare))
    return root / "remotes"


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return bare_remote(tmp_path)


def test_a_session_gets_a_worktree_on_its_own_branch_and_keeps_it(tmp_path: Path, remote: Path) -> None:
    spaces = Workspaces(tmp_path / "ws", GitRemote(f"file://{remote}/{{repository}}.git", token=TOKEN))
    first = spaces.open(session_id=42, repository="acme/api", title="Fix the flaky login test!")
    assert first.created and first.branch == "pacer/42-fix-the-flaky-login-test"
    assert (first.path / "README.md").read_text() == "hello\n"
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=first.path).strip() == first.branch
    again = spaces.open(session_id=42, repository="acme/api", title="another title")
    assert not again.created and again.path == first.path and again.branch == first.branch
    other = spaces.open(session_id=43, repository="acme/api", title="Other work")
    assert other.path != first.path and other.branch == "pacer/43-other-work"


def test_the_token_is_in_no_config_and_no_url(tmp_path: Path, remote: Path) -> None:
    spaces = Workspaces(tmp_path / "ws", GitRemote(f"file://{remote}/{{repository}}.git", token=TOKEN))
    space = spaces.open(session_id=7, repository="acme/api", title="x")
    configs = [spaces.mirror_path("acme/api") / "config", *spaces.root.rglob("config")]
    assert configs and all(TOKEN not in p.read_text() for p in configs if p.is_file())
    assert TOKEN not in git("config", "--list", cwd=space.path)
    assert TOKEN not in repr(spaces.remote)


def test_a_later_sync_fetches_new_commits_without_moving_the_sessions_branch(tmp_path: Path, remote: Path) -> None:
    spaces = Workspaces(tmp_path / "ws", GitRemote(f"file://{remote}/{{repository}}.git"))
    space = spaces.open(session_id=1, repository="acme/api", title="a")
    upstream = tmp_path / "upstream"
    git("clone", "-q", str(remote / "acme" / "api.git"), str(upstream))
    (upstream / "NEW.md").write_text("new\n")
    git("add", ".", cwd=upstream)
    git("commit", "-q", "-m", "second", cwd=upstream)
    git("push", "-q", "origin", "main", cwd=upstream)
    spaces.sync("acme/api")
    assert "second" in git("--git-dir", str(spaces.mirror_path("acme/api")), "log", "--oneline", "origin/main")
    later = spaces.open(session_id=2, repository="acme/api", title="b")
    assert (later.path / "NEW.md").exists() and not (space.path / "NEW.md").exists()


def test_removal_and_disk_usage(tmp_path: Path, remote: Path) -> None:
    spaces = Workspaces(tmp_path / "ws", GitRemote(f"file://{remote}/{{repository}}.git"))
    spaces.open(session_id=5, repository="acme/api", title="x")
    used = spaces.usage()
    assert used["mirrors"] > 0 and used["session-5"] > 0
    assert spaces.remove(5, "acme/api") is True and not spaces.worktree_path(5).exists()
    assert spaces.remove(5, "acme/api") is False
    assert "session-5" not in spaces.usage()


@pytest.mark.parametrize("repository", ["acme", "../etc/passwd", "acme/api/extra", "-x/y"])
def test_a_repository_that_is_not_owner_name_is_refused(tmp_path: Path, repository: str) -> None:
    spaces = Workspaces(tmp_path / "ws", GitRemote("file:///nowhere/{repository}.git"))
    with pytest.raises(WorkspaceError, match="not owner/name"):
        spaces.sync(repository)


def test_a_failed_fetch_names_the_step_and_never_the_token(tmp_path: Path) -> None:
    spaces = Workspaces(tmp_path / "ws", GitRemote(f"file://{tmp_path}/missing/{{repository}}.git", token=TOKEN))
    with pytest.raises(WorkspaceError, match="git clone failed") as raised:
        spaces.sync("acme/api")
    assert TOKEN not in str(raised.value)


def test_slugs() -> None:
    assert slug("Fix: the *login* flow (again)") == "fix-the-login-flow-again"
    assert slug("!!!") == "session"
    assert len(slug("x" * 200)) == 40
    assert branch_name(9, "Hi there") == "pacer/9-hi-there"


def commit(space_path: Path, name: str) -> None:
    (space_path / name).write_text(name)
    git("add", name, cwd=space_path)
    git(
        "-c",
        "user.name=agent",
        "-c",
        "user.email=agent@example.com",
        "commit",
        "-q",
        "-m",
        f"add {name}",
        cwd=space_path,
    )


def test_commits_are_counted_and_pushed_to_the_sessions_branch(tmp_path: Path, remote: Path) -> None:
    spaces = Workspaces(tmp_path / "ws", GitRemote(f"file://{remote}/{{repository}}.git", token=TOKEN))
    space = spaces.open(session_id=3, repository="acme/api", title="Add a file")
    assert spaces.new_commits(space) == 0  # nothing to push for a session without commits
    commit(space.path, "a.txt")
    commit(space.path, "b.txt")
    assert spaces.new_commits(space) == 2
    spaces.push(space)
    bare = remote / "acme" / "api.git"
    assert "add b.txt" in git("--git-dir", str(bare), "log", "--oneline", space.branch)
    assert spaces.new_commits(space) == 0
    commit(space.path, "c.txt")  # a later turn pushes to the same branch
    assert spaces.new_commits(space) == 1
    spaces.push(space)
    assert "add c.txt" in git("--git-dir", str(bare), "log", "--oneline", space.branch)


def test_a_rejected_push_is_reported_not_forced(tmp_path: Path, remote: Path) -> None:
    spaces = Workspaces(tmp_path / "ws", GitRemote(f"file://{remote}/{{repository}}.git"))
    space = spaces.open(session_id=4, repository="acme/api", title="race")
    commit(space.path, "mine.txt")
    spaces.push(space)
    other = tmp_path / "other"
    git("clone", "-q", "-b", space.branch, str(remote / "acme" / "api.git"), str(other))
    commit(other, "theirs.txt")
    git("push", "-q", "origin", space.branch, cwd=other)
    commit(space.path, "mine2.txt")
    with pytest.raises(WorkspaceError, match="git push failed"):
        spaces.push(space)
    assert "theirs.txt" in git("--git-dir", str(remote / "acme" / "api.git"), "log", "--stat", space.branch)


def test_sessions_opening_at_once_on_a_new_repository_each_get_their_worktree(tmp_path: Path, remote: Path) -> None:
    """Worker threads start turns together: one clone of the mirror, one worktree each."""
    from concurrent.futures import ThreadPoolExecutor

    spaces = Workspaces(tmp_path / "ws", GitRemote(f"file://{remote}/{{repository}}.git"))
    with ThreadPoolExecutor(max_workers=6) as pool:
        opened = list(
            pool.map(lambda sid: spaces.open(session_id=sid, repository="acme/api", title=f"work {sid}"), range(1, 7))
        )
    assert [space.branch for space in opened] == [f"pacer/{sid}-work-{sid}" for sid in range(1, 7)]
    assert all((space.path / "README.md").read_text() == "hello\n" for space in opened)
