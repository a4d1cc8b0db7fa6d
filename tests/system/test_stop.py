"""Stop means stop (P19 item 2), on GitHub, end to end: real git, the command runner with its
agent in the custody that ships, signed deliveries into the real webhook and the loopback stand-in
for GitHub's REST API. A label starts an agent that commits and then works on; closing the issue,
or removing the trigger label, while it works ends the agent's process within seconds, archives
the session with who stopped it and why (the status comment says so), and pushes nothing of the
halted turn. Removing any other label stops nothing."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
from scheduler.clock import SystemClock
from scheduler.store.models import Session, Trigger, Turn
from scheduler.testing import VirtualClock, VirtualDeferrer
from tests.integrations.test_workspaces import git
from tests.support.custody_support import agent_processes, agent_python, custody_settings
from tests.support.github_support import SECRET, FakeGithub, headers, issue_payload, serving
from tests.support.harness import T0, context
from tests.support.paths import FIXTURES

AGENT = FIXTURES / "agents" / "busy_agent.py"


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    seed = tmp_path / "seed"
    seed.mkdir()
    git("init", "-q", "-b", "main", cwd=seed)
    (seed / "README.md").write_text("hello\n")
    git("add", ".", cwd=seed)
    git("commit", "-q", "-m", "first", cwd=seed)
    git("clone", "-q", "--bare", str(seed), str(tmp_path / "remotes" / "acme" / "api.git"))
    return tmp_path / "remotes"


def _pacer(engine: Engine, room: Path, github: FakeGithub, remote: Path) -> Pacer:
    settings = load(
        {
            "GITHUB_WEBHOOK_SECRET": SECRET,
            "GITHUB_TOKEN": "ghs_stop_sekret_0123456789",
            "GITHUB_API_URL": github.url + "/",
            "PACER_GITHUB_WRITE_SECONDS": "0",
            "PACER_RUNNER": "command",
            "PACER_RUNNER_COMMAND": f"{agent_python()} {room / 'bin' / AGENT.name} {{prompt}}",
            "PACER_WORKSPACES": str(room / "ws"),
            "PACER_GIT_REMOTE": f"file://{remote}/{{repository}}.git",
            "PACER_WORKDIR": str(room / "work"),
            **custody_settings(room, "shipped"),
        },
        toml_path=None,
    )
    runner = build_runner(settings, {**os.environ, "HOME": str(room)}, engine=engine)
    ctx = context(engine, SystemClock(), VirtualDeferrer(VirtualClock(T0)), build_pool(settings, runner), wired=True,
                  notifier=CompositeNotifier(LogNotifier()), runtimes=runtimes_from_settings(settings))
    with DBSession(engine) as db:
        db.add(Trigger(name="label", kind="github_label", prompt_template="Fix {{ repository }}#{{ number }}",
                       config={"label": "agent-work"}, created_at=ctx.clock.now()))
        db.commit()
    return Pacer(settings=settings, engine=engine, clock=ctx.clock, deferrer=ctx.ports.deferrer, ctx=ctx)


def _wait(what: str, check: Callable[[], Any], seconds: float = 10) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.05)
    raise AssertionError(f"waited {seconds}s for {what}")


def _session(engine: Engine) -> Session:
    with DBSession(engine) as db:
        return db.exec(select(Session).order_by(col(Session.id))).one()


@contextmanager
def _working(engine: Engine, room: Path, github: FakeGithub, remote: Path) -> Iterator[httpx.Client]:
    """Pacer serving, and session #1's agent at work on acme/api#7 (it has committed)."""
    app = create_app(_pacer(engine, room, github, remote), start_scheduler=False)
    with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        _deliver(client, "issues", issue_payload("labeled", label="agent-work", repository="acme/api", number=7))
        _wait("the agent at work", (room / "ws" / "sessions" / "session-1" / ".seen" / "running").exists)
        assert agent_processes(room / "bin" / AGENT.name)
        yield client


def _deliver(client: httpx.Client, event: str, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    answer = client.post("/github/webhook", content=body, headers=headers(event, body))
    assert answer.status_code in (200, 202), answer.text


@pytest.mark.parametrize(
    ("event", "sentence"),
    [
        (issue_payload("closed", repository="acme/api", number=7, sender="carol"),
         "Stopped: carol closed it on GitHub; its running turn was halted. Archived"),
        (issue_payload("unlabeled", label="Agent-Work", repository="acme/api", number=7, sender="carol"),
         "Stopped: carol removed the label `Agent-Work`; its running turn was halted. Archived"),
    ],
    ids=["closed", "unlabeled"],
)
def test_closing_the_issue_or_removing_its_label_halts_the_running_agent(
    engine: Engine, room: Path, github: FakeGithub, remote: Path, event: dict[str, Any], sentence: str
) -> None:
    with _working(engine, room, github, remote) as client:
        started = time.monotonic()
        _deliver(client, "issues", event)
        _wait("the agent's process to end", lambda: not agent_processes(room / "bin" / AGENT.name))
        assert time.monotonic() - started < 10
        _wait("the turn's report", lambda: _session(engine).source.get("stopped") and _turn_ended(engine))
        _wait("the status comment", lambda: any(sentence in c["body"] for c in github.comments.values()))
    session = _session(engine)
    assert session.status == "archived"
    assert session.source["stopped"] == {"by": "github:carol", "why": event["action"],
                                         "label": event.get("label", {}).get("name"), "halted": True}
    with DBSession(engine) as db:
        (turn,) = db.exec(select(Turn)).all()
    assert turn.outcome == "halted"
    # The agent committed before it was stopped: none of it reached the remote, and no pull request.
    branches = git("--git-dir", str(remote / "acme" / "api.git"), "branch", "--format=%(refname:short)")
    assert branches.split() == ["main"] and github.pulls == {}


def test_removing_another_label_stops_nothing(engine: Engine, room: Path, github: FakeGithub, remote: Path) -> None:
    with _working(engine, room, github, remote) as client:
        _deliver(client, "issues", issue_payload("unlabeled", label="bug", repository="acme/api", number=7))
        time.sleep(0.5)
        assert _session(engine).status == "running" and agent_processes(room / "bin" / AGENT.name)
        _deliver(client, "issues", issue_payload("closed", repository="acme/api", number=7))  # clean up
        _wait("the agent's process to end", lambda: not agent_processes(room / "bin" / AGENT.name))


def _turn_ended(engine: Engine) -> bool:
    with DBSession(engine) as db:
        return db.exec(select(Turn).where(Turn.status == "running")).first() is None
