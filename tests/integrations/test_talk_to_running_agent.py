"""Talk to a running agent (issue #31, item 3): a person's message to a session whose turn is
running reaches the agent mid-turn when its CLI takes streamed input (Claude Code's
`--input-format stream-json`), and otherwise waits for the turn's end; the sender is told which.

The real command runner, with a stand-in agent that speaks stream-json on real pipes, under the
real leased worker pool; the message is sent through a second engine on the same database, as
another process (the server taking a Slack reply while a worker runs the turn) would send it."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import col, select

from integrations.runners.command import CommandRunner
from integrations.runners.pool import ThreadWorkerPool
from integrations.turn_leases import LeasedPool
from scheduler.clock import SystemClock
from scheduler.engine.turns import submit_turn
from scheduler.steering.promotion import record_human_message
from scheduler.store.db import make_engine, session_scope
from scheduler.store.models import EnqueuedMessage, HumanMessage, Turn
from scheduler.testing import VirtualClock, VirtualDeferrer
from tests.support.harness import T0, context, new
from tests.support.paths import FIXTURES

AGENT = FIXTURES / "agents" / "listening_agent.py"
STREAMED = f"{sys.executable} {AGENT} -p --input-format stream-json --output-format stream-json --verbose"
PLAIN = f"{sys.executable} {AGENT} -p --output-format stream-json --verbose {{prompt}}"


def _ctx(engine: Engine, tmp_path: Path, template: str) -> Any:
    runner = CommandRunner(template, "", "claude_code", 60, tmp_path / "work", env={"PATH": "/usr/bin:/bin"},
                           kill_grace_s=0.5)
    clock = SystemClock()
    workers = LeasedPool(ThreadWorkerPool(runner, 2), engine, "test-owner", timedelta(seconds=60), clock.now)
    return context(engine, clock, VirtualDeferrer(VirtualClock(T0)), workers, wired=True)


@pytest.fixture
def other(any_engine: Engine) -> Iterator[Any]:
    """The sender's side: a second engine on the same database, as another process has."""
    engine = make_engine(any_engine.url.render_as_string(hide_password=False))
    yield lambda ctx: context(engine, ctx.clock, VirtualDeferrer(VirtualClock(T0)), ctx.ports.workers, wired=False)
    engine.dispose()


def _wait(check: Callable[[], Any], seconds: float = 20) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("waited in vain")


def _turns(engine: Engine, session_id: int) -> list[Turn]:
    with session_scope(engine) as db:
        return list(db.exec(select(Turn).where(Turn.session_id == session_id).order_by(col(Turn.id))))


def _listening(engine: Engine, session_id: int) -> bool:
    return any(t.listening and t.status == "running" for t in _turns(engine, session_id))


def _said(turn: Turn) -> dict[str, Any]:
    return dict(json.loads(turn.output))


def test_a_message_reaches_a_listening_agent_mid_turn_and_its_sender_is_told(
    any_engine: Engine, tmp_path: Path, other: Any
) -> None:
    ctx = _ctx(any_engine, tmp_path, STREAMED)
    session = new(ctx, title="Listening", runtime="echo")
    assert submit_turn(ctx, session, "fix it [listen:3]").outcome == "started"
    _wait(lambda: _listening(any_engine, session))
    message = record_human_message(other(ctx), session, "alice", "use the other API", "api", roster=True)
    assert message.delivery == "agent"
    first = _wait(lambda: [t for t in _turns(any_engine, session) if t.status == "done"])[0]
    assert _said(first) == {"prompt": "fix it [listen:3]", "heard": ["use the other API"]}
    assert not first.listening
    with session_scope(any_engine) as db:  # taken by the running agent: not delivered again as a turn
        assert all(m.delivered_at is not None for m in db.exec(select(EnqueuedMessage)))
    time.sleep(1.0)
    assert len(_turns(any_engine, session)) == 1
    # Once it has answered it listens no more: the next message waits for (and is) the next turn.
    later = record_human_message(other(ctx), session, "alice", "and add a test", "api", roster=True)
    assert later.delivery is None  # no turn ran: it is the next turn at once
    second = _wait(lambda: [t for t in _turns(any_engine, session) if t.status == "done" and t.id != first.id])[0]
    assert _said(second)["prompt"] == "and add a test"
    ctx.ports.workers.shutdown(wait=True)


def test_a_message_to_an_agent_without_streamed_input_waits_for_the_turns_end(
    engine: Engine, tmp_path: Path
) -> None:
    ctx = _ctx(engine, tmp_path, PLAIN)
    session = new(ctx, title="Deaf by design", runtime="echo")
    assert submit_turn(ctx, session, "fix it [listen:2]").outcome == "started"
    _wait(lambda: any(t.status == "running" for t in _turns(engine, session)))
    message = record_human_message(ctx, session, "alice", "use the other API", "console", roster=True)
    assert message.delivery == "after_turn"
    turns = _wait(lambda: len(_turns(engine, session)) == 2 and all(t.status == "done" for t in _turns(engine, session))
                  and _turns(engine, session))
    assert _said(turns[0])["heard"] == [] and _said(turns[1])["prompt"] == "use the other API"
    with session_scope(engine) as db:
        assert [m.text for m in db.exec(select(HumanMessage))] == ["use the other API"]
    ctx.ports.workers.shutdown(wait=True)


def test_an_agent_that_closes_its_input_neither_blocks_the_turn_nor_loses_the_message(
    engine: Engine, tmp_path: Path
) -> None:
    ctx = _ctx(engine, tmp_path, STREAMED)
    session = new(ctx, title="Hostile", runtime="echo")
    started = time.monotonic()
    assert submit_turn(ctx, session, "[deaf]").outcome == "started"
    _wait(lambda: any(t.status == "running" for t in _turns(engine, session)))
    time.sleep(1.5)  # it has closed its stdin by now: the listener finds its reader gone and stops listening
    message = record_human_message(ctx, session, "alice", "are you there", "console", roster=True)
    assert message.delivery == "after_turn"
    turns = _wait(lambda: len(_turns(engine, session)) == 2 and all(t.status == "done" for t in _turns(engine, session))
                  and _turns(engine, session))
    assert time.monotonic() - started < 15
    assert turns[0].outcome == "success" and "are you there" in turns[1].prompt
    ctx.ports.workers.shutdown(wait=True)


def test_an_agent_that_never_reads_its_input_does_not_hold_up_the_turn(engine: Engine, tmp_path: Path) -> None:
    """The pipe fills (64 KiB) and the writer waits on it without blocking anyone: the senders are
    answered at once, the turn ends when the agent does, and what was not handed over waits."""
    ctx = _ctx(engine, tmp_path, STREAMED)
    session = new(ctx, title="Mute", runtime="echo")
    started = time.monotonic()
    assert submit_turn(ctx, session, "[mute] [listen:3]").outcome == "started"
    _wait(lambda: _listening(engine, session))
    sent = []
    for n in range(60):
        before = time.monotonic()
        spoken = record_human_message(ctx, session, "alice", f"[listen:0] note {n} " + "x" * 8000, "console",
                                      roster=True)
        sent.append((time.monotonic() - before, spoken.delivery))
    first = _wait(lambda: [t for t in _turns(engine, session) if t.status == "done"])[0]
    assert first.outcome == "success" and time.monotonic() - started < 10
    assert max(took for took, _ in sent) < 1.0  # a sender never waits on the agent's pipe
    with session_scope(engine) as db:
        left = [m for m in db.exec(select(EnqueuedMessage)) if m.delivered_at is None]
    # Only what the pipe took (64 KiB: 8 of these) went to the agent; what the feed still held
    # when it ended was given back, and the rest was never taken: all wait for the next turn.
    assert len(left) >= 60 - 9, len(left)
    ctx.ports.workers.shutdown(wait=True)
