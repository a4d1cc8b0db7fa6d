"""The work loop end to end, with real git, real processes and real HTTP: a signed `issues.labeled`
delivery becomes a session whose agent (a stand-in script) commits in its worktree; the branch
reaches the remote (a bare repository on disk, over file://), one draft pull request refers to
the issue on a loopback stand-in for GitHub's REST API, and the status comment holds the whole
result. The token reaches neither the worktree's git config nor the agent's environment."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.config.settings import load
from bot.runtime.adapters import build_pool, build_runner, runtimes_from_settings
from bot.runtime.notify import CompositeNotifier, LogNotifier
from bot.runtime.process import Pacer
from bot.serve.app import create_app
from integrations.slack.messages import thread_messages
from scheduler.clock import SystemClock
from scheduler.store.models import Session, Trigger, Turn
from scheduler.testing import VirtualClock, VirtualDeferrer
from tests.integrations.test_workspaces import git
from tests.support.custody_support import agent_python, custody_settings
from tests.support.github_support import SECRET, FakeGithub, comment_payload, headers, issue_payload, serving
from tests.support.harness import T0, context
from tests.support.paths import FIXTURES
from tests.support.slack_mock import BOT_TOKEN, SIGNING_SECRET, MockSlack, PacerServer, SlackClient

TOKEN = "ghs_work_loop_sekret_0123456789"
AGENT = FIXTURES / "agents" / "commit_agent.py"
RESULT_CHARS = 6000


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """acme/api.git on disk, one commit on main."""
    seed = tmp_path / "seed"
    seed.mkdir()
    git("init", "-q", "-b", "main", cwd=seed)
    (seed / "README.md").write_text("hello\n")
    git("add", ".", cwd=seed)
    git("commit", "-q", "-m", "first", cwd=seed)
    git("clone", "-q", "--bare", str(seed), str(tmp_path / "remotes" / "acme" / "api.git"))
    return tmp_path / "remotes"


def _pacer(engine: Engine, room: Path, github: FakeGithub, remote: Path, **extra: str) -> Pacer:
    """Pacer with the command runner in the custody that ships: the agent runs as its own user (the
    tests run as root) and in the sandbox where this machine has one."""
    settings = load(
        {
            "GITHUB_WEBHOOK_SECRET": SECRET,
            "GITHUB_TOKEN": TOKEN,
            "GITHUB_API_URL": github.url + "/",
            "PACER_GITHUB_WRITE_SECONDS": "0",
            "PACER_RUNNER": "command",
            "PACER_RUNNER_COMMAND": f"{agent_python()} {room / 'bin' / AGENT.name} {{prompt}}",
            "PACER_WORKSPACES": str(room / "ws"),
            "PACER_GIT_REMOTE": f"file://{remote}/{{repository}}.git",
            "PACER_WORKDIR": str(room / "work"),
            "PACER_MAX_BODY_BYTES": "131072",
            **custody_settings(room, "shipped"),
            **extra,
        },
        toml_path=None,
    )
    # The agent inherits a process environment that holds the token, as production's would.
    runner = build_runner(settings, {**os.environ, "GITHUB_TOKEN": TOKEN, "HOME": str(room)}, engine=engine)
    ctx = context(engine, SystemClock(), VirtualDeferrer(VirtualClock(T0)), build_pool(settings, runner), wired=True,
                  notifier=CompositeNotifier(LogNotifier()), runtimes=runtimes_from_settings(settings))
    with DBSession(engine) as db:
        db.add(
            Trigger(
                name="label",
                kind="github_label",
                prompt_template="Fix {{ repository }}#{{ number }}: {{ title }}",
                created_at=ctx.clock.now(),
            )
        )
        db.add(
            Trigger(
                name="work",
                kind="slack",
                prompt_template="{{ text }}",
                config={"channels": ["C0WORK"], "repository": "acme/api"},
                created_at=ctx.clock.now(),
            )
        )
        db.commit()
    return Pacer(settings=settings, engine=engine, clock=ctx.clock, deferrer=ctx.ports.deferrer, ctx=ctx)


def _wait(what: str, check: Callable[[], Any], seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"waited {seconds}s for {what}")


def comment_text(github: FakeGithub) -> str:
    return "".join(c["body"] for c in github.comments.values())


def _session(engine: Engine) -> Session:
    with DBSession(engine) as db:
        return db.exec(select(Session).order_by(col(Session.id))).one()


BRANCH = "pacer/1-record-every-turn"


def first_turn(engine: Engine, github: FakeGithub, remote: Path, comment: dict[str, Any]) -> None:
    """What the first turn left: the branch on the remote, one draft pull request, the whole answer."""
    session = _session(engine)
    assert session.repository == "acme/api" and session.status == "done"
    assert session.source["workspace"]["branch"] == BRANCH
    bare = remote / "acme" / "api.git"
    assert git("--git-dir", str(bare), "log", "--format=%s", BRANCH).splitlines() == ["Record turn 1", "first"]
    (number, pull), = github.pulls.items()
    assert (pull["repository"], pull["head"], pull["base"], pull["draft"]) == ("acme/api", BRANCH, "main", True)
    assert pull["title"] == "Record every turn" and pull["body"].startswith("Refs #7\n")
    assert session.source["workspace"]["pull_request"] == {"number": number, "url": f"https://github.com/acme/api/pull/{number}"}
    with DBSession(engine) as db:
        output = db.exec(select(Turn.output)).one()
    assert len(output) == RESULT_CHARS and output in comment["body"]
    assert comment["issue"] == "acme/api#7" and "<details open>" in comment["body"]
    for fact in ("$0.42", "61.0 s", "MB on disk |", f"[`{BRANCH}`](https://github.com/acme/api/tree/{BRANCH})",
                 f"[#{number}](https://github.com/acme/api/pull/{number})"):
        assert fact in comment["body"], fact


def test_a_label_becomes_a_branch_a_draft_pull_request_and_the_whole_answer(
    engine: Engine, room: Path, github: FakeGithub, remote: Path
) -> None:
    pacer = _pacer(engine, room, github, remote)
    app = create_app(pacer, start_scheduler=False)
    payload = issue_payload("labeled", label="pacer", repository="acme/api", number=7, title="Record every turn")
    body = json.dumps(payload).encode()
    with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        answer = client.post("/github/webhook", content=body, headers=headers("issues", body))
        assert answer.status_code == 202, answer.text
        comment = _wait("the status comment with the result",
                        lambda: next((c for c in github.comments.values() if "END OF RESULT" in c["body"]), None))
        first_turn(engine, github, remote, comment)

        # A trusted comment on the issue is the next turn, on the same branch, in the same pull
        # request; an untrusted one does nothing.
        for who, association in (("eve", "NONE"), ("bob", "COLLABORATOR")):
            said = json.dumps(comment_payload(f"{who}: also log it", repository="acme/api", number=7, commenter=who,
                                              association=association)).encode()
            assert (
                client.post("/github/webhook", content=said, headers=headers("issue_comment", said)).status_code == 202
            )
        _wait("the second turn's result", lambda: "Turn 2 done" in comment_text(github))
    bare = remote / "acme" / "api.git"
    assert git("--git-dir", str(bare), "log", "--format=%s", BRANCH).splitlines() == [
        "Record turn 2",
        "Record turn 1",
        "first",
    ]
    (number,) = github.pulls
    assert "Turn 2 done" in github.pulls[number]["body"]
    with DBSession(engine) as db:
        assert [t.prompt for t in db.exec(select(Turn).order_by(col(Turn.id)))] == [
            "Fix acme/api#7: Record every turn",
            "bob: also log it",
        ]
    assert "| Turns | 2 |" in comment_text(github) and len(github.comments) == 1

    # The token reached git for the push alone: not the worktree's config, not the agent.
    seen = room / "ws" / "sessions" / "session-1" / ".seen"
    environment = json.loads((seen / "env-1.json").read_text())
    assert environment["PACER_SESSION_ID"] == "1"
    assert (room / "ws" / "sessions" / "session-1" / "CHANGES.md").read_text().startswith("turn 1: Fix acme/api#7")
    assert not any(TOKEN in value for value in environment.values()) and "GITHUB_TOKEN" not in environment
    assert all(TOKEN not in (seen / f"git-config-{n}.txt").read_text() for n in (1, 2))
    assert all(TOKEN not in p.read_text(errors="replace") for p in (room / "ws").rglob("config") if p.is_file())


def test_a_slack_message_gets_the_whole_answer_in_its_thread(
    engine: Engine, room: Path, github: FakeGithub, remote: Path, mock: MockSlack
) -> None:
    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": mock.api_url,
        "PACER_ROSTER": "UMEM=member",
    }
    pacer = _pacer(engine, room, github, remote, **env)
    app = create_app(pacer, start_scheduler=False)
    server = PacerServer(app).start()
    client = SlackClient(server.url, app.state.slack, mock)
    try:
        message = {
            "type": "message",
            "channel": "C0WORK",
            "user": "UMEM",
            "text": "Record every turn",
            "ts": "1790000000.000100",
            "channel_type": "channel",
        }
        assert client.event(message, event_id="Ev0WORK1").status_code == 200
        posts = _wait(
            "the answer in the thread",
            lambda: (
                [c for c in mock.calls_to("chat.postMessage") if "is done." in c.body["text"]]
                and mock.calls_to("chat.postMessage")
            ),
        )
    finally:
        client.close()
        server.stop()
    session = _session(engine)
    assert session.repository == "acme/api" and session.status == "done"
    with DBSession(engine) as db:
        output = db.exec(select(Turn.output)).one()
    thread = [c.body for c in posts if c.body.get("thread_ts") == "1790000000.000100"]
    done = thread[[i for i, body in enumerate(thread) if "is done." in body["text"]][0]:]
    assert sum(len(body["blocks"]) for body in done) >= 3  # 6,000 characters and the facts: three sections at least
    assert all(len(block["text"]["text"]) <= 3000 for body in done for block in body["blocks"])
    lines = "\n".join(body["text"] for body in done).splitlines()
    answer = "\n".join(line.removeprefix("> ") for line in lines if line.startswith("> "))
    assert len(output) == RESULT_CHARS and answer == output.replace("&", "&amp;").replace("<", "&lt;").replace(
        ">", "&gt;"
    )
    (number,) = github.pulls
    assert f"<https://github.com/acme/api/pull/{number}|pull request #{number}>" in done[-1]["text"]


def test_an_answer_longer_than_a_message_goes_whole_over_several() -> None:
    text = "".join(f"{i:05d} " + "x" * 94 + "\n" for i in range(1000))  # 101,000 characters
    messages = thread_messages(text)
    assert len(messages) == 4 and all(len(m["blocks"]) <= 10 and len(m["text"]) <= 30_000 for m in messages)
    assert all(len(block["text"]["text"]) <= 3000 for m in messages for block in m["blocks"])
    assert "\n".join(m["text"] for m in messages) == text.rstrip("\n")
