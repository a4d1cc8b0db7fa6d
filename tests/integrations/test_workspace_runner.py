"""The runner edge of the work loop, with real git and the GitHub stand-in: a session with a
repository runs in its worktree; commits are pushed and become one draft pull request, updated by
later turns; no commit, no push; a rejected push is recorded, not forced or retried; a workspace
that cannot be made fails the turn saying why; archived and expired worktrees are removed."""

from __future__ import annotations

import base64
import subprocess
import threading
from collections.abc import Callable
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DBSession

from integrations.github.client import GithubClients
from integrations.github.publish import Publisher
from integrations.github.pulls import PyGithubPulls
from integrations.github.status import read_status, render_body
from integrations.runners.workspace import WorkspaceJanitor, WorkspaceRunner, sweep
from integrations.workspaces import GitRemote, Workspaces
from scheduler.ports import Outcome, TurnRequest, TurnResult
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Status, Turn
from scheduler.store.sessions import NewSession, create_session
from tests.integrations.test_workspaces import git
from tests.support.github_support import FakeGithub
from tests.support.harness import T0

IDENTITY = ["-c", "user.name=Agent", "-c", "user.email=agent@example.com"]


class Agent:
    """A stand-in for the agent process: runs `work(workdir)` and answers what it returns."""

    def __init__(self, work: Callable[[Path], str]) -> None:
        self.work = work
        self.requests: list[TurnRequest] = []

    def run(self, request: TurnRequest) -> TurnResult:
        self.requests.append(request)
        output = self.work(Path(request.workdir)) if request.workdir else "no workdir"
        return TurnResult(Outcome.SUCCESS, cost_usd=0.1, output=output, duration_ms=1500)

    def halt(self, turn_id: int) -> bool:
        return False


def commit(message: str) -> Callable[[Path], str]:
    def work(path: Path) -> str:
        with open(path / "CHANGES.md", "a") as changes:
            changes.write(message + "\n")
        subprocess.run(["git", *IDENTITY, "add", "CHANGES.md"], cwd=path, check=True)
        subprocess.run(["git", *IDENTITY, "commit", "-q", "-m", message], cwd=path, check=True)
        return f"I committed {message!r}."
    return work


@pytest.fixture
def spaces(tmp_path: Path) -> Workspaces:
    seed = tmp_path / "seed"
    seed.mkdir()
    git("init", "-q", "-b", "main", cwd=seed)
    (seed / "README.md").write_text("hello\n")
    git("add", ".", cwd=seed)
    git("commit", "-q", "-m", "first", cwd=seed)
    git("clone", "-q", "--bare", str(seed), str(tmp_path / "remotes" / "acme" / "api.git"))
    return Workspaces(tmp_path / "ws", GitRemote(f"file://{tmp_path}/remotes/{{repository}}.git"))


def runner(engine: Engine, spaces: Workspaces, github: FakeGithub, agent: Agent) -> WorkspaceRunner:
    pulls = PyGithubPulls(GithubClients(base_url=github.url + "/", token="ghp_test", write_seconds=0))
    return WorkspaceRunner(agent, spaces, engine, publish=Publisher(spaces, pulls))


def session(engine: Engine, **kw: object) -> int:
    with session_scope(engine) as db:
        return create_session(db, NewSession(**kw), now=T0).id or 0  # type: ignore[arg-type]


def turn(run: WorkspaceRunner, session_id: int, turn_id: int) -> TurnResult:
    return run.run(TurnRequest(session_id=session_id, turn_id=turn_id, prompt="go"))


def remote_log(spaces: Workspaces, branch: str) -> list[str]:
    bare = Path(spaces.remote.url("acme/api").removeprefix("file://"))
    return git("--git-dir", str(bare), "log", "--format=%s", branch).splitlines()


def record(engine: Engine, session_id: int) -> dict[str, object]:
    with DBSession(engine) as db:
        row = db.get(Session, session_id)
        assert row is not None
        return dict(row.source["workspace"])


def test_a_session_without_a_repository_runs_as_before(engine: Engine, spaces: Workspaces, github: FakeGithub) -> None:
    agent = Agent(lambda path: str(path))
    sid = session(engine, title="plain")
    assert turn(runner(engine, spaces, github, agent), sid, 1).output == "no workdir"
    assert agent.requests[0].workdir is None and not spaces.root.exists() and github.calls == []


def test_turns_share_a_worktree_and_one_pull_request_follows_the_branch(
    engine: Engine, spaces: Workspaces, github: FakeGithub
) -> None:
    sid = session(engine, title="Tidy the docs", repository="acme/api")
    first = turn(runner(engine, spaces, github, Agent(commit("one"))), sid, 1)
    branch = f"pacer/{sid}-tidy-the-docs"
    assert first.outcome is Outcome.SUCCESS and first.extra["workspace"]["branch"] == branch
    assert remote_log(spaces, branch) == ["one", "first"]
    (number, pull), = github.pulls.items()
    assert (pull["title"], pull["draft"], pull["base"]) == ("Tidy the docs", True, "main")
    assert "I committed 'one'." in pull["body"] and not pull["body"].startswith("Refs")  # no issue to refer to

    agent = Agent(commit("two"))
    turn(runner(engine, spaces, github, agent), sid, 2)
    assert agent.requests[0].workdir == str(spaces.worktree_path(sid))
    assert remote_log(spaces, branch) == ["two", "one", "first"]
    assert list(github.pulls) == [number] and "I committed 'two'." in github.pulls[number]["body"]
    assert [c.method for c in github.calls if "/pulls" in c.path] == ["GET", "POST", "GET", "PATCH"]
    assert record(engine, sid)["pull_request"] == {"number": number, "url": f"https://github.com/acme/api/pull/{number}"}
    with DBSession(engine) as db:
        assert db.get(Session, sid).workdir == str(spaces.worktree_path(sid))  # type: ignore[union-attr]


def test_nothing_is_pushed_for_a_turn_without_commits(engine: Engine, spaces: Workspaces, github: FakeGithub) -> None:
    sid = session(engine, title="Just look", repository="acme/api")
    result = turn(runner(engine, spaces, github, Agent(lambda path: "Read it; nothing to change.")), sid, 1)
    assert result.outcome is Outcome.SUCCESS and record(engine, sid)["pushed"] == 0
    bare = Path(spaces.remote.url("acme/api").removeprefix("file://"))
    assert git("--git-dir", str(bare), "branch", "--list", "--format=%(refname:short)").split() == ["main"]
    assert github.calls == []


def test_a_rejected_push_is_recorded_and_shown_never_forced(
    engine: Engine, spaces: Workspaces, github: FakeGithub, tmp_path: Path
) -> None:
    sid = session(engine, title="Race", repository="acme/api")
    turn(runner(engine, spaces, github, Agent(commit("one"))), sid, 1)
    branch = f"pacer/{sid}-race"
    # Someone else moves the branch on the remote.
    other = tmp_path / "other"
    git("clone", "-q", "-b", branch, spaces.remote.url("acme/api"), str(other))
    (other / "THEIRS.md").write_text("theirs\n")
    git("add", ".", cwd=other)
    git("commit", "-q", "-m", "theirs", cwd=other)
    git("push", "-q", "origin", branch, cwd=other)

    result = turn(runner(engine, spaces, github, Agent(commit("two"))), sid, 2)
    assert result.outcome is Outcome.SUCCESS  # the agent's work stands; its publishing failed
    error = record(engine, sid)["push_error"]
    assert isinstance(error, str) and error.startswith("git push failed") and "rejected" in error
    assert remote_log(spaces, branch) == ["theirs", "one", "first"]  # not forced
    with session_scope(engine) as db:
        db.add(
            Turn(
                session_id=sid,
                status="done",
                output=result.output,
                cost_usd=0.1,
                duration_ms=1500,
                created_at=T0,
                finished_at=T0,
            )
        )
        row = db.get(Session, sid)
        assert row is not None
        row.status = Status.DONE.value
        row.source = {**row.source, "kind": "github", "repository": "acme/api", "number": 3, "url": "https://github.com/acme/api/issues/3"}
    with DBSession(engine) as db:
        found = read_status(db, sid, T0)
    assert found is not None
    assert f"| Push | rejected, not retried: {error} |" in render_body(found[1])


def test_a_workspace_that_cannot_be_made_fails_the_turn_saying_why(
    engine: Engine, spaces: Workspaces, github: FakeGithub
) -> None:
    sid = session(engine, title="Elsewhere", repository="acme/missing")
    agent = Agent(lambda path: "never")
    result = turn(runner(engine, spaces, github, agent), sid, 1)
    assert result.outcome is Outcome.FAILED_RETRYABLE and agent.requests == []
    assert result.error is not None and result.error.startswith(
        "The session's workspace of acme/missing could not be made: git clone failed"
    )


def test_archived_and_expired_worktrees_are_removed_and_a_later_turn_finds_its_branch(
    engine: Engine, spaces: Workspaces, github: FakeGithub
) -> None:
    archived, expired, recent = (session(engine, title=t, repository="acme/api") for t in ("a", "b", "c"))
    for sid in (archived, expired, recent):
        turn(runner(engine, spaces, github, Agent(commit(f"work of {sid}"))), sid, sid)
    with session_scope(engine) as db:
        for sid, status, finished in (
            (archived, Status.ARCHIVED, T0),
            (expired, Status.DONE, T0),
            (recent, Status.DONE, T0 + timedelta(hours=71)),
        ):
            row = db.get(Session, sid)
            assert row is not None
            row.status, row.finished_at = status.value, finished
    janitor = WorkspaceJanitor(engine, spaces)
    janitor.notify("archived", {"session_id": archived})
    assert janitor.drain(30) and not spaces.worktree_path(archived).exists()
    usage = sweep(engine, spaces, T0 + timedelta(hours=72), timedelta(hours=72))
    assert set(usage) == {"mirrors", f"session-{recent}"} and usage[f"session-{recent}"] > 0
    assert not spaces.worktree_path(expired).exists()

    # A new message after the sweep: the session's branch, with its commit, comes back.
    agent = Agent(commit("again"))
    turn(runner(engine, spaces, github, agent), expired, 10)
    assert remote_log(spaces, f"pacer/{expired}-b") == ["again", f"work of {expired}", "first"]


def test_a_session_from_a_pull_request_starts_from_its_branch_and_targets_it(
    engine: Engine, spaces: Workspaces, github: FakeGithub, tmp_path: Path
) -> None:
    other = tmp_path / "feature"
    git("clone", "-q", spaces.remote.url("acme/api"), str(other))
    git("checkout", "-q", "-b", "feature", cwd=other)
    (other / "FEATURE.md").write_text("feature\n")
    git("add", ".", cwd=other)
    git("commit", "-q", "-m", "feature work", cwd=other)
    git("push", "-q", "origin", "feature", cwd=other)
    source = {"kind": "github", "repository": "acme/api", "number": 5, "is_pull_request": True, "head_ref": "feature",
              "url": "https://github.com/acme/api/pull/5"}
    sid = session(engine, title="acme/api#5 Finish the feature", repository="acme/api", source=source)
    turn(runner(engine, spaces, github, Agent(commit("finish"))), sid, 1)
    assert remote_log(spaces, f"pacer/{sid}-finish-the-feature") == ["finish", "feature work", "first"]
    (pull,) = github.pulls.values()
    assert (pull["base"], pull["title"]) == ("feature", "Finish the feature") and pull["body"].startswith("Refs #5\n")


def test_a_github_apps_installation_token_reaches_the_remote_for_its_session_only(
    engine: Engine, tmp_path: Path
) -> None:
    """A real HTTP remote on loopback: git's own request carries the installation's token as
    its Authorization header; no config, no URL and no error message holds it."""
    seen: list[str] = []

    class Remote(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            return None

        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization") or "")
            self.send_response(403)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Remote)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    asked: list[int | None] = []

    def credentials(installation_id: int | None) -> str:
        asked.append(installation_id)
        return "ghs_installation_token_42"

    try:
        spaces = Workspaces(tmp_path / "ws", GitRemote(f"http://127.0.0.1:{server.server_address[1]}/{{repository}}.git"))
        sid = session(
            engine,
            title="x",
            repository="acme/api",
            source={"kind": "github", "repository": "acme/api", "number": 1, "installation_id": 42},
        )
        agent = Agent(lambda path: "never")
        result = WorkspaceRunner(agent, spaces, engine, credentials=credentials).run(
            TurnRequest(session_id=sid, turn_id=1, prompt="go")
        )
    finally:
        server.shutdown()
        server.server_close()
    assert asked == [42] and agent.requests == [] and result.outcome is Outcome.FAILED_RETRYABLE
    assert seen and seen[0] == "Basic " + base64.b64encode(b"x-access-token:ghs_installation_token_42").decode()
    assert "ghs_installation_token_42" not in (result.error or "")
    assert all(
        "ghs_installation_token_42" not in p.read_text(errors="replace")
        for p in (tmp_path / "ws").rglob("*")
        if p.is_file()
    )


def test_past_the_disk_bound_finished_worktrees_go_oldest_first_and_working_ones_stay(
    engine: Engine, spaces: Workspaces, github: FakeGithub
) -> None:
    def big(path: Path) -> str:
        (path / "BIG.bin").write_bytes(b"\0" * 200_000)
        return "made a big file"

    older, newer, working = (session(engine, title=t, repository="acme/api") for t in ("older", "newer", "working"))
    for sid in (older, newer, working):
        turn(runner(engine, spaces, github, Agent(big)), sid, sid)
        assert record(engine, sid)["disk_bytes"] >= 200_000  # type: ignore[operator]
    with session_scope(engine) as db:
        for sid, status, finished in (
            (older, Status.DONE, T0),
            (newer, Status.DONE, T0 + timedelta(minutes=5)),
            (working, Status.WAITING, None),
        ):
            row = db.get(Session, sid)
            assert row is not None
            row.status, row.finished_at = status.value, finished
    per_worktree = spaces.worktree_bytes(older)
    spaces.max_bytes = spaces.usage()["mirrors"] + 2 * per_worktree + per_worktree // 2  # room for two and a half
    usage = sweep(engine, spaces, T0 + timedelta(hours=1), timedelta(hours=72))  # nothing is past its TTL
    assert set(usage) == {"mirrors", f"session-{newer}", f"session-{working}"}
    spaces.max_bytes = 1  # over, and only a working session's worktree left to take: it stays
    assert set(sweep(engine, spaces, T0 + timedelta(hours=1), timedelta(hours=72))) == {"mirrors", f"session-{working}"}
