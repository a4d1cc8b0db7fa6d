"""The queue's order holds on every path into a turn (seed 001, "What brings it back"; the ranked queue): a
spot turn the gate would admit does not overtake spot work ranked ahead of it — the held
sessions above it, and a session the scheduler paused mid-run at the front — and a turn's end
offers the room it frees to that paused session before held work of its rank or below.

Before, work arriving between passes took the room whenever the pace had it, and the sweep, every
five minutes, found the room taken: in the saturated example four paused sessions never came back
(38 to 110 simulated hours), and 19 held sessions never started while newer ones of the same
precedence did."""

from __future__ import annotations

import threading

import pytest

from scheduler.engine.queue_pass import queue_pass
from scheduler.engine.start_now import start_now
from scheduler.engine.turns import submit_turn
from scheduler.pauses import ceiling
from tests.support.sweeping import Scene

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def held_behind_a_full_fleet(scene: Scene, n: int, **kw) -> list[int]:
    ids = [scene.session(**kw) for _ in range(n)]
    for sid in ids:
        assert submit_turn(scene.ctx, sid, f"work {sid}").outcome == "held"
    return ids


@pytest.mark.parametrize(
    ("precedence", "slots", "newcomer", "older"),
    [
        (0, 2, "held", "running"),  # one slot frees, same rank: the older held session takes it
        (5, 2, "started", "waiting"),  # a higher precedence goes ahead of held work
        (0, 3, "started", "running"),  # room for both: both start, the older first
    ],
)
def test_a_new_spot_turn_takes_its_place_in_the_queue(engine, clock, precedence, slots, newcomer, older) -> None:
    scene = Scene(engine, clock, max_sessions=1, turn_minutes=600)
    scene.start(cls="priority")
    (held,) = held_behind_a_full_fleet(scene, 1)
    scene.advance(minutes=1)
    scene.policy(max_sessions=slots)  # room frees without a requested pass: the next turn to ask decides who takes it
    new = scene.session(precedence=precedence)
    sub = submit_turn(scene.ctx, new, "newer work")
    assert (sub.outcome, scene.row(held).status) == (newcomer, older)
    if newcomer == "held":
        assert sub.reason == "fleet_at_cap"  # the gate's own reason, asked again after the queue ahead went
        assert scene.row(new).hold_prompt == "newer work"  # deferred, never dropped


def test_a_person_pressing_start_now_is_not_held_behind_the_queue(engine, clock) -> None:
    scene = Scene(engine, clock, max_sessions=1, turn_minutes=600)
    scene.start(cls="priority")
    (older,) = held_behind_a_full_fleet(scene, 1)
    newer = scene.session()
    submit_turn(scene.ctx, newer, "newer work")
    scene.policy(max_sessions=2)
    assert start_now(scene.ctx, newer).submission.outcome == "started"  # seed 002: ignores position order
    assert scene.row(older).status == "waiting"


def test_the_paused_session_at_the_front_goes_back_before_newer_work_one_per_pass(engine, clock) -> None:
    scene = Scene(engine, clock, max_sessions=3, turn_minutes=60)
    first = scene.start(minutes=600)
    second = scene.start(minutes=600)
    scene.quota.spent_5h = 900  # over the spot budget: the ceiling pauses the running spot work
    assert sorted(scene.sweep().paused) == sorted([first, second])
    scene.quota.spent_5h = 0  # the rollover
    newer = scene.session()
    assert submit_turn(scene.ctx, newer, "newer work").outcome == "started"  # room for it too
    # Its admission offered the room to the session at the front first (oldest pause, then id) — one
    # resume a pass, as a freed slot is one slot; the sweep's batch brings back the rest.
    assert scene.row(first).status == "running" and scene.row(first).pause_reason is None
    assert scene.row(second).pause_reason == "at_utilization_limit"
    assert scene.sweep().resumed == [second]


def test_a_preemption_victim_takes_a_freed_slot_at_once_inside_the_cooldown(engine, clock) -> None:
    """Seed 001, "It joins the queue that already exists": its resume condition is a free slot
    inside the budget, and the slot its preemptor frees is exactly that. The cooldown bounds who
    may yield again, not when the queue may hand the slot back: the pass a turn's end requests
    resumes it, not the five-minute sweep."""
    scene = Scene(engine, clock, max_sessions=2, turn_minutes=600)
    scene.start()
    scene.start()
    scene.start(cls="priority", minutes=20)  # a full fleet: the priority start marks a victim
    scene.advance(minutes=11)
    assert scene.sweep().marks.halted  # past the grace with the fleet still full: the victim is halted
    victim = scene.events("preempt_marked")[0]["session_id"]
    assert scene.row(victim).pause_reason == "preempted_by_priority" and victim not in scene.running_ids()
    scene.advance(minutes=10)  # the priority turn has ended: a slot is free, inside the cooldown
    assert victim in scene.running_ids() and scene.row(victim).pause_reason is None
    newcomer = scene.session()
    assert submit_turn(scene.ctx, newcomer, "new").reason == "fleet_at_cap"  # the victim had the slot first


def test_what_the_queue_ahead_left_is_asked_whole_its_group_included(engine, clock) -> None:
    """A child spawned into its parent's repo outranks it (precedence + 1) and is held for the
    group; the parent's queued follow-up starts the child first, and then is held for the group
    itself — not started beside it on the strength of the gate alone."""
    scene = Scene(engine, clock, max_sessions=3, turn_minutes=30)
    parent = scene.start(concurrency_group="repo:x", minutes=30)
    child = scene.session(concurrency_group="repo:x", parent_id=parent, minutes=600)
    assert scene.row(child).precedence > scene.row(parent).precedence
    assert submit_turn(scene.ctx, child, "child work").reason == "concurrency_group"
    assert submit_turn(scene.ctx, parent, "parent follow-up", kind="follow_up").outcome == "queued"
    scene.advance(minutes=31)  # the parent's turn ends; its queued follow-up asks for a turn
    assert child in scene.running_ids() and parent not in scene.running_ids()
    assert scene.row(parent).hold_reason == "concurrency_group" and scene.row(parent).hold_prompt == "parent follow-up"


def test_bookkeeping_does_not_wait_on_the_queue(engine, clock) -> None:
    """Pacer's own seconds-long forks are refused when they cannot run, never queued: the queue
    ahead is not offered their room first (it could only turn a start into a hold)."""
    scene = Scene(engine, clock, max_sessions=1, turn_minutes=600)
    scene.start(cls="priority")
    (older,) = held_behind_a_full_fleet(scene, 1)
    scene.policy(max_sessions=2)
    fork = scene.session(bookkeeping=True)
    assert submit_turn(scene.ctx, fork, "summarise").outcome == "started"
    assert scene.row(older).status == "waiting"


def test_the_sweep_leaves_alone_a_session_a_pass_resumed_meanwhile(any_engine, clock, monkeypatch) -> None:
    """PostgreSQL: a queue pass in another transaction, asked after the sweep read its list of
    paused sessions, waits for the sweep to commit (one decider at a time: `db.one_decider`)
    and then finds them resumed, so each session runs one turn, not two. (Before that lock the
    pass committed first, and the sweep's row lock and re-check were what kept it to one.)"""
    if any_engine.dialect.name != "postgresql":
        pytest.skip("SQLite serialises the two transactions: the race cannot happen")
    scene = Scene(any_engine, clock, max_sessions=3, turn_minutes=600)
    first = scene.start()
    second = scene.start()
    scene.quota.spent_5h = 900
    assert sorted(scene.sweep().paused) == sorted([first, second])
    scene.quota.spent_5h = 0  # the rollover
    listed = ceiling.dormant_paused

    other = threading.Thread(target=lambda: queue_pass(scene.ctx))

    def then_a_turn_ends_elsewhere(db, policy, limit):
        found = listed(db, policy, limit)
        other.start()
        other.join(timeout=0.5)
        assert other.is_alive(), "the other decider went ahead inside the sweep's transaction"
        return found

    monkeypatch.setattr(ceiling, "dormant_paused", then_a_turn_ends_elsewhere)
    scene.sweep()
    other.join(timeout=30)
    assert not other.is_alive()
    for sid in (first, second):
        assert [t.status for t in scene.turns(sid)].count("running") <= 1
    assert {first, second} <= scene.running_ids()
