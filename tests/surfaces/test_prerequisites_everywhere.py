"""`depends on #n` and `@#n` on every surface that starts work (seed 002, "Declared prerequisites
are honoured"): a Slack message, `/pacer new` and the REST API declare prerequisites as an issue
body does, and the session waits until the target is done."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlmodel import select

from bot.chat import answers
from bot.config.settings import load
from bot.runtime.process import Pacer
from scheduler import wiring
from scheduler.engine.lifecycle import archive
from scheduler.engine.turns import submit_turn
from scheduler.holds.prerequisites import unsatisfied
from scheduler.store import db as dbmod
from scheduler.store.models import Session
from tests.support import harness
from tests.support.api_client import make_api
from tests.support.harness import new, row
from tests.support.slack_mock import serving

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _target(ctx: Any) -> int:
    """A session running now: what the others declare they wait on."""
    sid = new(ctx, genesis="command", title="migrate the schema")
    assert submit_turn(ctx, sid, "migrate").outcome == "started"
    return sid


def test_pacer_new_declares_what_it_depends_on(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = harness.build(engine, clock, max_sessions=5, wired=True)
    pacer = Pacer(
        settings=load({"PACER_ROSTER": "UOP=operator"}, toml_path=None),
        engine=engine,
        clock=clock,
        deferrer=deferrer,
        ctx=ctx,
    )
    target = _target(ctx)

    reply = answers.answer(pacer, "UOP", f"new write the release notes; depends on #{target}", surface="console")

    assert reply.ok, reply.text
    with dbmod.session_scope(engine) as db:
        waiter = db.exec(select(Session).where(Session.id != target)).one()
        assert [p.target for p in unsatisfied(db, waiter.id or 0)] == [f"#{target}"]
    assert waiter.hold_reason == "prerequisite" and waiter.status == "waiting"
    archive(ctx, target, actor="UOP")  # done or canceled satisfies it; the archive asks for a pass
    deferrer.advance(timedelta(0))
    assert row(ctx, waiter.id or 0).status == "running"


def test_an_api_session_declares_what_it_depends_on(engine, clock) -> None:
    api = make_api(engine, clock, max_sessions=5, turn_minutes=30)
    try:
        target = _target(api.ctx)
        r = api.post("/sessions", {"prompt": f"@#{target} deploy the new schema"})
        assert r.status_code == 201, r.text
        out = r.json()
        assert out["submission"]["outcome"] == "held" and out["submission"]["reason"] == "prerequisite"
        assert f"#{target}" in out["submission"]["why"]
        assert out["session"]["waiting"]["headline"]["reason"] == "prerequisite"
    finally:
        api.close()


def test_a_slack_message_declares_what_it_depends_on(engine, clock, deferrer, mock) -> None:
    with serving(engine, clock, deferrer, mock) as slack:
        ctx = wiring.install(slack.pacer.ctx)
        target = _target(ctx)
        slack.event({"type": "message", "channel": "D0DM", "channel_type": "im", "user": "UMEM",
                     "text": f"update the changelog, depends on #{target}", "ts": "1790000000.000100"}, event_id="Ev1")
        slack.settle()
        with dbmod.session_scope(engine) as db:
            waiter = db.exec(select(Session).where(Session.genesis == "slack")).one()
        assert waiter.hold_reason == "prerequisite" and waiter.status == "waiting"
