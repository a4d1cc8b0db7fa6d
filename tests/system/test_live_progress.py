"""Live progress end to end (P19 item 1), as the work loop runs it (tests/system/test_work_loop.py):
real git, the agent in the custody that ships, a signed `issues.labeled` delivery and a Slack
message each becoming a session, on the loopback GitHub stand-in and the Slack mock. The stand-in
agent prints tool calls and TodoWrite lines for 26 s: the issue's status comment is edited with
the checklist at least twice before the result, never sooner than PROGRESS_SECONDS after the
write before it, and ends on the whole answer; the Slack thread's progress message is posted once
and edited in place, and says when its turn ended."""

from __future__ import annotations

import json
import os
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
from sqlalchemy import Engine
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.config.settings import load
from bot.runtime.adapters import build_pool, build_runner, runtimes_from_settings
from bot.runtime.notify import CompositeNotifier, LogNotifier
from bot.runtime.process import Pacer
from bot.serve.app import create_app
from integrations.github.comments import PROGRESS_SECONDS as GITHUB_SECONDS
from integrations.slack.notifier import PROGRESS_SECONDS as SLACK_SECONDS
from integrations.turn_leases import LeasedPool
from integrations.turn_progress import ProgressBook
from scheduler.clock import SystemClock
from scheduler.store.models import Session, Trigger, Turn
from scheduler.testing import VirtualClock, VirtualDeferrer
from tests.support.custody_support import agent_python, custody_settings
from tests.support.github_support import SECRET, FakeGithub, headers, issue_payload, serving
from tests.support.harness import T0, context
from tests.support.paths import FIXTURES
from tests.support.slack_mock import BOT_TOKEN, SIGNING_SECRET, MockSlack, PacerServer, SlackClient
from tests.system.test_work_loop import _wait, remote  # noqa: F401  (remote: the bare repository fixture)

AGENT = FIXTURES / "agents" / "progress_agent.py"
THREAD = "1790000000.000100"


def _pacer(engine: Engine, room: Path, github: FakeGithub, remote: Path, mock: MockSlack) -> Pacer:  # noqa: F811
    """Pacer as `pacer serve` builds its workers: the runner in custody, its turns' progress kept
    by the pool's progress book and told to the notifier chain the app's surfaces join."""
    settings = load(
        {
            "GITHUB_WEBHOOK_SECRET": SECRET,
            "GITHUB_TOKEN": "ghs_live_progress_0123456789",
            "GITHUB_API_URL": github.url + "/",
            "PACER_RUNNER": "command",
            "PACER_RUNNER_COMMAND": f"{agent_python()} {room / 'bin' / AGENT.name} {{prompt}}",
            "PACER_WORKSPACES": str(room / "ws"),
            "PACER_GIT_REMOTE": f"file://{remote}/{{repository}}.git",
            "PACER_WORKDIR": str(room / "work"),
            "PACER_AGENT_WORKERS": "2",
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_API_URL": mock.api_url,
            "PACER_ROSTER": "UMEM=member",
            **custody_settings(room, "shipped"),
        },
        toml_path=None,
    )
    runner = build_runner(settings, {**os.environ, "HOME": str(room)}, engine=engine)
    clock, owner = SystemClock(), f"test-{uuid.uuid4().hex[:8]}"
    notifier = CompositeNotifier(LogNotifier())
    book = ProgressBook(engine, owner, notifier.notify, clock.now)
    workers = LeasedPool(build_pool(settings, runner), engine, owner, timedelta(seconds=60), clock.now, progress=book)
    ctx = context(engine, clock, VirtualDeferrer(VirtualClock(T0)), workers, wired=True, notifier=notifier,
                  runtimes=runtimes_from_settings(settings))
    ctx.owner, ctx.limits.turn_lease = owner, timedelta(seconds=60)
    with DBSession(engine) as db:
        db.add(Trigger(name="label", kind="github_label", prompt_template="Fix {{ repository }}#{{ number }}",
                       created_at=clock.now()))
        db.add(Trigger(name="work", kind="slack", prompt_template="{{ text }}",
                       config={"channels": ["C0WORK"], "repository": "acme/api"}, created_at=clock.now()))
        db.commit()
    return Pacer(settings=settings, engine=engine, clock=clock, deferrer=ctx.ports.deferrer, ctx=ctx)


def test_a_running_turn_shows_its_checklist_on_the_issue_and_in_the_thread_edited_in_place(
    engine: Engine, room: Path, github: FakeGithub, remote: Path, mock: MockSlack  # noqa: F811
) -> None:
    pacer = _pacer(engine, room, github, remote, mock)
    app = create_app(pacer, start_scheduler=False)
    server = PacerServer(app).start()
    slack = SlackClient(server.url, app.state.slack, mock)
    payload = issue_payload("labeled", label="pacer", repository="acme/api", number=7, title="Fix the parser")
    body = json.dumps(payload).encode()
    message = {"type": "message", "channel": "C0WORK", "user": "UMEM", "text": "Fix the parser too", "ts": THREAD,
               "channel_type": "channel"}
    try:
        with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
            assert client.post("/github/webhook", content=body, headers=headers("issues", body)).status_code == 202
            assert slack.event(message, event_id="Ev0LIVE1").status_code == 200
            _wait("the whole answer on the issue",
                  lambda: any("Fixed it" in c["body"] for c in github.comments.values()), seconds=90)
            _wait("the answer in the thread",
                  lambda: any("is done." in c.body["text"] for c in mock.calls_to("chat.postMessage")), seconds=90)
    finally:
        slack.close()
        server.stop()
    with DBSession(engine) as db:
        assert sorted(s.status for s in db.exec(select(Session))) == ["done", "done"]

    # The issue: every write of its one sticky comment, in order, until the whole answer.
    writes = [c for c in github.writes() if "/comments" in c.path and c.body and "body" in c.body]
    final = next(i for i, c in enumerate(writes) if "Fixed it" in c.body["body"])
    checklists = [c for c in writes[:final] if "- [x]" in c.body["body"] or "- [ ]" in c.body["body"]]
    assert len(checklists) >= 2, [c.body["body"] for c in writes]
    assert all(c.method == "PATCH" for c in writes[1:]) and len(github.comments) == 1  # edited in place
    for before, edit in zip(writes[:final], writes[1:final], strict=False):
        if edit in checklists:
            assert edit.at - before.at >= GITHUB_SECONDS - 0.5, (edit.at - before.at, edit.body["body"])
    shown = checklists[-1].body["body"]
    assert "**Now:** `" in shown and "into this turn" in shown and "- [x] Read the parser" in shown
    assert "Started: an agent is working on this now." in shown
    assert "**Now:**" not in writes[final].body["body"] and "- [ ]" not in writes[final].body["body"]

    # The thread: one progress message, posted once, then edited in place (chat.update on its ts).
    in_thread = [c for c in mock.calls if c.body.get("channel") == "C0WORK"]
    posted = [c for c in in_thread if c.method == "chat.postMessage" and "*Now:*" in c.body["text"]]
    assert len(posted) == 1, [c.body["text"] for c in in_thread]
    assert posted[0].body["thread_ts"] == THREAD
    with DBSession(engine) as db:
        kept = [t.progress_message for t in db.exec(select(Turn).order_by(col(Turn.id)))]
    (ts,) = [k for k in kept if k is not None]  # the Slack session's turn alone has one
    updates = mock.calls_to("chat.update")
    assert len(updates) >= 3 and {c.body["ts"] for c in updates} == {ts}
    running = [c for c in updates if "*Now:*" in c.body["text"]]
    assert len(running) >= 2 and any(":white_check_mark: ~Read the parser~" in c.body["text"] for c in running)
    gaps = [b.at - a.at for a, b in zip([posted[0], *running], running, strict=False)]
    assert min(gaps) >= SLACK_SECONDS - 0.5, gaps
    assert "This turn has ended" in updates[-1].body["text"]
    news = [c for c in in_thread if c.method == "chat.postMessage" and "is done." in c.body["text"]]
    assert len(news) == 1 and news[0].at > updates[-1].at  # the end is said on the message before the news

