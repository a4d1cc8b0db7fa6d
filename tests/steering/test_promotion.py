"""A human message jumps the queue (seed 001, "A human message jumps the queue", "The rank
alone is not enough", "The exchange, and why it refuses more often than it fires", "Where it runs")."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from sqlmodel import select

from scheduler.engine.lifecycle import archive
from scheduler.engine.turns import submit_turn
from scheduler.errors import Forbidden, InvalidInput, NotFound, Refused
from scheduler.rules.precedence import SLOT_GAP
from scheduler.steering import promotion
from scheduler.steering.promotion import (
    STARVATION_EXEMPTION,
    choose_demotion,
    promotion_job_id,
    record_human_message,
)
from scheduler.store.db import session_scope
from scheduler.store.models import EnqueuedMessage, HumanMessage, Session
from tests.support.harness import T0
from tests.support.sweeping import Scene

ROSTER = {"U1": "member", "U2": "operator", "U9": "guest"}


def say(scene: Scene, sid: int, text: str = "please look at this", actor: str = "U1") -> HumanMessage:
    return record_human_message(scene.ctx, sid, actor, text, "slack_thread", roster=ROSTER)


def run_promotion(scene: Scene) -> None:
    scene.deferrer.run_until(scene.clock.now())  # the alarm armed at "now", off the request path


def messages(scene: Scene) -> list[HumanMessage]:
    with session_scope(scene.ctx.engine) as db:
        return list(db.exec(select(HumanMessage)))


def held_behind_full_fleet(engine, clock, *, precedences=(10, 20)) -> tuple[Scene, int, list[int]]:
    scene = Scene(engine, clock, max_sessions=1, turn_minutes=30)
    scene.start(cls="priority")  # holds the only slot
    others = []
    for p in precedences:
        sid = scene.session(precedence=p)
        submit_turn(scene.ctx, sid, f"queued at {p}")
        others.append(sid)
    target = scene.session(precedence=0)
    submit_turn(scene.ctx, target, "the held turn")
    assert scene.row(target).hold_reason == "fleet_at_cap"
    return scene, target, others


def test_a_message_is_recorded_delivered_and_the_rerank_runs_off_the_request_path(engine, clock) -> None:
    scene, target, (_q10, _q20) = held_behind_full_fleet(engine, clock)
    message = say(scene, target)
    assert (message.session_id, message.actor, message.surface) == (target, "U1", "slack_thread")
    with session_scope(engine) as db:
        queued = db.exec(select(EnqueuedMessage).where(EnqueuedMessage.session_id == target)).one()
    assert (queued.prompt, queued.kind) == ("please look at this", "human")  # behind the held turn
    assert scene.row(target).precedence == 0 and promotion_job_id(target) in scene.deferrer.pending()
    run_promotion(scene)
    s = scene.row(target)
    assert s.precedence == 20 + SLOT_GAP and s.scheduling_class == "spot"
    assert s.hold_reason == "fleet_at_cap"  # it stays spot: a full fleet holds it again
    scene.advance(minutes=31)  # the slot frees: the front of the queue takes it
    assert target in scene.running_ids()
    scene.advance(minutes=31)
    prompts = [r.prompt for r in scene.workers.submitted if r.session_id == target]
    assert prompts == ["the held turn", "please look at this"]


def test_the_rank_alone_is_not_enough_startnow_asks_the_gate_now(engine, clock) -> None:
    scene = Scene(engine, clock)
    scene.quota.spent_5h = 900
    sid = scene.session()
    submit_turn(scene.ctx, sid, "held on the budget")
    assert scene.row(sid).hold_retry_at - clock.now() >= timedelta(minutes=10)
    scene.quota.spent_5h = 0  # the budget is back, but its re-check is ten minutes out
    say(scene, sid)
    run_promotion(scene)
    assert sid in scene.running_ids() and scene.workers.submitted[-1].prompt == "held on the budget"


def test_the_instance_form_keeps_a_session_already_at_the_head_where_it_is(engine, clock) -> None:
    scene, target, _others = held_behind_full_fleet(engine, clock)
    say(scene, target)
    run_promotion(scene)
    first = scene.row(target).precedence
    say(scene, target, "and another thing")
    run_promotion(scene)
    assert scene.row(target).precedence == first


def test_a_priority_session_is_not_reranked(engine, clock) -> None:
    scene = Scene(engine, clock)
    p = scene.start(cls="priority", precedence=3)
    say(scene, p)
    run_promotion(scene)
    assert scene.row(p).precedence == 3 and len(messages(scene)) == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "field_or_text"),
    [
        ({"text": "  "}, InvalidInput, "text"),
        ({"text": "x" * 100_001}, InvalidInput, "text"),
        ({"surface": "new_session_form"}, InvalidInput, "surface"),
        ({"actor": ""}, InvalidInput, "actor"),
        ({"actor": "U404"}, Forbidden, "needs the member or operator role; U404 is not on the roster"),
        ({"actor": "U9"}, Forbidden, "needs the member or operator role; U9 is not on the roster"),
        ({"roster": False}, Forbidden, "needs the member or operator role"),
    ],
)
def test_only_an_established_actor_is_a_human_and_bad_input_changes_nothing(
    engine, clock, kwargs, error, field_or_text
) -> None:
    scene = Scene(engine, clock)
    sid = scene.session()
    args = {"actor": "U1", "text": "hello", "surface": "slack_thread", "roster": ROSTER} | kwargs
    with pytest.raises(error) as info:
        record_human_message(scene.ctx, sid, args["actor"], args["text"], args["surface"], roster=args["roster"])
    if error is InvalidInput:
        assert info.value.field == field_or_text
    else:
        assert field_or_text in str(info.value)
    assert messages(scene) == [] and scene.workers.submitted == [] and scene.deferrer.pending() == []


def test_a_caller_that_resolved_the_roster_itself_passes_true(engine, clock) -> None:
    scene = Scene(engine, clock)
    sid = scene.session()
    record_human_message(scene.ctx, sid, "console", "from the terminal", "console", roster=True)
    assert [m.surface for m in messages(scene)] == ["console"]


def test_unknown_and_archived_sessions_are_refused(engine, clock) -> None:
    scene = Scene(engine, clock)
    with pytest.raises(NotFound):
        say(scene, 999)
    sid = scene.session()
    archive(scene.ctx, sid)
    with pytest.raises(Refused, match="archived"):
        say(scene, sid)
    assert messages(scene) == []


def test_only_the_session_spoken_to_is_recorded(engine, clock) -> None:
    scene = Scene(engine, clock)
    router = scene.session(cls="priority")
    child = scene.session(parent_id=router)
    say(scene, router)
    assert [m.session_id for m in messages(scene)] == [router]
    assert scene.row(child).precedence == scene.row(router).precedence + 1  # untouched


def test_a_failure_in_the_rerank_is_logged_and_swallowed_and_the_message_kept(
    engine, clock, monkeypatch, caplog
) -> None:
    scene, target, _others = held_behind_full_fleet(engine, clock)

    def broken(*args, **kwargs):
        raise RuntimeError("queue unreadable")

    monkeypatch.setattr(promotion, "set_precedence", broken)
    say(scene, target)
    with caplog.at_level(logging.ERROR, logger="pacer.promotion"):
        result = promotion.promote_after_message(scene.ctx, messages(scene)[0].id)
    assert result.error == "RuntimeError: queue unreadable" and "the message itself is kept" in caplog.text
    assert len(messages(scene)) == 1 and scene.row(target).precedence == 0


# --------------------------------------------------------------------------- the exchange


def candidate(sid: int, *, precedence: int = 10, demotions: int = 0, age_hours: float = 1.0) -> Session:
    return Session(id=sid, precedence=precedence, demotion_count=demotions, created_at=T0 - timedelta(hours=age_hours))


@pytest.mark.parametrize(
    ("rule", "candidates", "counts", "last", "expected"),
    [
        ("fewest human messages", [candidate(1), candidate(2), candidate(3)], {1: 2, 2: 0, 3: 1}, {}, 2),
        (
            "then the oldest last human message",
            [candidate(1), candidate(2)],
            {1: 1, 2: 1},
            {1: T0 - timedelta(minutes=5), 2: T0 - timedelta(hours=3)},
            2,
        ),
        (
            "then fewest prior demotions",
            [candidate(1, demotions=2), candidate(2, demotions=0), candidate(3, demotions=1)],
            {},
            {},
            2,
        ),
        (
            "then the highest precedence: the one jumping the queue on nothing",
            [candidate(1, precedence=10), candidate(2, precedence=40), candidate(3, precedence=20)],
            {},
            {},
            2,
        ),
        (
            "then the newest",
            [candidate(1, age_hours=5), candidate(2, age_hours=1), candidate(3, age_hours=3)],
            {},
            {},
            2,
        ),
    ],
)
def test_who_goes_to_the_bottom(rule, candidates, counts, last, expected) -> None:
    result = choose_demotion(3, candidates, counts, last, floor=-5, now=T0)
    assert (result.demoted_id, result.refusal, result.new_precedence) == (expected, None, -5 - SLOT_GAP), rule


@pytest.mark.parametrize(
    ("rule", "promoted_count", "candidates", "counts", "refusal"),
    [
        ("nobody strictly less involved", 1, [candidate(1), candidate(2)], {1: 1, 2: 3}, "nobody_less_involved"),
        ("an empty queue", 1, [], {}, "nobody_less_involved"),
        ("created more than 24 hours ago", 2, [candidate(1, age_hours=25)], {}, "starvation_exemption"),
        ("already at the bottom", 2, [candidate(1, precedence=-5)], {}, "already_at_bottom"),
    ],
)
def test_the_three_refusals_demote_nobody(rule, promoted_count, candidates, counts, refusal) -> None:
    result = choose_demotion(promoted_count, candidates, counts, {}, floor=-5, now=T0)
    assert result.refusal == refusal and result.new_precedence is None, rule


def test_the_starvation_exemption_is_a_day_exactly() -> None:
    assert timedelta(hours=24) == STARVATION_EXEMPTION
    at_edge = choose_demotion(1, [candidate(1, age_hours=24)], {}, {}, floor=-5, now=T0)
    assert at_edge.demoted_id == 1 and at_edge.refusal is None


def test_the_exchange_demotes_one_dormant_spot_session_and_changes_nothing_else(engine, clock) -> None:
    scene, target, (q10, q20, _bottom) = held_behind_full_fleet(engine, clock, precedences=(10, 20, -3))
    before = scene.row(q20)
    say(scene, target)
    run_promotion(scene)
    after = scene.row(q20)  # least involved, never demoted, and the highest: it was jumping the queue on nothing
    assert after.precedence == -3 - SLOT_GAP and after.demotion_count == 1
    assert (after.hold_reason, after.hold_prompt, after.status) == (before.hold_reason, before.hold_prompt, "waiting")
    assert scene.row(q10).precedence == 10 and scene.events("demoted_by_exchange")[0]["promoted_id"] == target


def test_a_running_session_is_not_in_the_queue_and_is_never_demoted(engine, clock) -> None:
    scene = Scene(engine, clock, max_sessions=2)
    running = scene.start(precedence=50)
    target = scene.session(precedence=0)
    say(scene, target)
    run_promotion(scene)
    assert scene.row(running).precedence == 50 and scene.row(running).demotion_count == 0
