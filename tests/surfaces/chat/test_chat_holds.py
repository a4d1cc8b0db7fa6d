"""hold, release, resume, pause … queue and reply through the one chat handler."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from bot.chat import answers
from bot.commands import USAGE
from bot.config.settings import load
from bot.runtime.process import Pacer
from scheduler.engine.turns import submit_turn
from scheduler.store.db import session_scope
from scheduler.store.models import HumanMessage, OperatorHold, QueueHold, Session
from tests.support import harness
from tests.support.harness import T0

ROSTER = "UOP=operator,UMEM=member,UTWO=member"


@pytest.fixture
def pacer(engine, clock) -> Pacer:
    ctx, deferrer, _workers, _quota = harness.build(engine, clock, max_sessions=2, wired=True)
    return Pacer(
        settings=load({"PACER_ROSTER": ROSTER}, toml_path=None), engine=engine, clock=clock, deferrer=deferrer, ctx=ctx
    )


def ask(pacer, text, actor="UOP", surface="console"):
    return answers.answer(pacer, actor, text, surface=surface)


def session(pacer, sid) -> Session:
    with session_scope(pacer.engine) as db:
        return db.get(Session, sid)


def test_hold_and_release_an_operator_hold(pacer) -> None:
    sid = harness.new(pacer.ctx, genesis="github_label", requester="UMEM")
    placed = ask(pacer, f"hold #{sid} for 2h waiting on the deploy", actor="UMEM")
    assert placed.ok, placed.text
    with session_scope(pacer.engine) as db:
        hold = db.exec(select(OperatorHold)).one()
    assert (hold.armer, hold.selector_kind, hold.expires_at) == ("UMEM", "session", T0 + timedelta(hours=2))
    assert placed.text.startswith(f"Hold {hold.id} placed by UMEM on session {sid}")
    sub = submit_turn(pacer.ctx, sid, "go")
    assert sub.outcome == "held" and "held by UMEM" in sub.sentence
    other = ask(pacer, f"release {hold.id}", actor="UTWO")
    assert not other.ok and "needs the operator role" in other.text
    released = ask(pacer, f"release {hold.id}", actor="UMEM")
    assert released.ok and released.text.startswith(f"Hold {hold.id} (placed by UMEM) is released")
    again = ask(pacer, f"release {hold.id}")
    assert not again.ok and "already released by UMEM" in again.text


def test_resume_lifts_a_resumable_queue_hold_and_refuses_otherwise(pacer, clock) -> None:
    nothing = ask(pacer, "resume")
    assert not nothing.ok and "nothing to resume: no queue hold is in force on the whole queue" in nothing.text
    with session_scope(pacer.engine) as db:
        db.add(QueueHold(reason="credits", sentence="credits", since=clock.now()))
        db.add(
            QueueHold(
                group="repo:acme/api",
                reason="prerequisite",
                sentence="waiting on #12",
                since=clock.now(),
                detail={"targets": ["#12"]},
            )
        )
    resumed = ask(pacer, "resume")
    assert resumed.ok, resumed.text
    refused = ask(pacer, "resume repo:acme/api")
    assert not refused.ok and "Resume cannot lift a prerequisite hold: it would re-apply at once" in refused.text
    with session_scope(pacer.engine) as db:
        holds = {h.reason: h.released_at for h in db.exec(select(QueueHold))}
    assert holds["credits"] is not None and holds["prerequisite"] is None


def test_pause_queue_parks_the_session_in_the_spot_queue(pacer) -> None:
    sid = harness.new(pacer.ctx, genesis="command", requester="UMEM")  # priority by genesis
    reply = ask(pacer, f"pause {sid} queue", actor="UMEM")
    assert reply.ok, reply.text
    parked = session(pacer, sid)
    assert (parked.pause_reason, parked.scheduling_class) == ("user_spot_queue", "spot")


def test_reply_is_a_human_message_delivered_as_the_next_turn(pacer) -> None:
    sid = harness.new(pacer.ctx, requester="UMEM")
    reply = ask(pacer, f"reply {sid} please also update the changelog", actor="UTWO")
    assert reply.ok and f"Your message is on #{sid}" in reply.text
    with session_scope(pacer.engine) as db:
        [message] = db.exec(select(HumanMessage)).all()
    assert (message.session_id, message.actor, message.surface, message.text) == (
        sid,
        "UTWO",
        "console",
        "please also update the changelog",
    )
    stranger = ask(pacer, f"reply {sid} hello", actor="USTRANGER", surface="slack")
    assert not stranger.ok and "not on the roster" in stranger.text
    bad = ask(pacer, "reply nine hello")
    assert not bad.ok and USAGE["reply"] in bad.text
