"""Work is never run twice or left behind after a crash or a late message (P9): a preemption
victim interrupted by a crash is re-asked at once with its re-check, a message to a paused
session waits for the pause's one resume owner, and a message that takes over a sleeping session
consumes its wake."""

from __future__ import annotations

from datetime import timedelta

from scheduler.engine.lifecycle import recover
from scheduler.engine.records import hold_job_id, wake_job_id
from scheduler.engine.turns import submit_turn
from scheduler.pauses.sleep import wake_me_up_later
from scheduler.steering.promotion import record_human_message
from templates import render
from tests.pauses.test_ceiling import pause_all
from tests.pauses.test_preemption import full_fleet, marked
from tests.support.sweeping import Scene


def crash(scene: Scene) -> None:
    """SIGKILL in virtual time: every turn in flight is lost with its process, and nothing
    reports it; the row still says running."""
    for turn_id in list(scene.workers.running):
        scene.workers.running.pop(turn_id)
        scene.deferrer.cancel(f"turn-end:{turn_id}")


def test_a_preemption_victim_interrupted_by_a_crash_is_asked_again_at_once(engine, clock) -> None:
    scene, (a, b, c) = full_fleet(engine, clock, 5, 0, 10)
    p = scene.start(cls="priority", title="urgent fix")
    assert marked(scene) == [b]
    crash(scene)
    recover(scene.ctx)
    victim = scene.row(b)
    assert marked(scene) == [] and victim.pause_reason is None and not victim.pending_sleep
    assert victim.preemption_count == 0 and victim.last_preempted_at is None  # un-charged: it never yielded
    assert (victim.status, victim.hold_reason, victim.hold_retry_at) == ("waiting", "interrupted", clock.now())
    assert scene.deferrer.next_run(hold_job_id(b)) == clock.now()  # its re-check is real, not a promise
    scene.advance(minutes=0)
    # The replays go through the gate in queue order: the priority turn first, then the spot
    # ones while slots last; nothing waits on a ceiling sweep 10-20 minutes away.
    assert scene.running_ids() == {p, a, c}
    assert scene.row(b).hold_reason == "fleet_at_cap"
    assert [t.prompt for t in scene.turns(b)] == ["work"]  # one turn: never run twice
    scene.advance(minutes=60)
    assert scene.row(b).status in ("running", "done") and len(scene.turns(b)) == 2


def test_a_follow_up_to_a_paused_session_waits_for_the_sweep_and_its_margin(engine, clock) -> None:
    scene = Scene(engine, clock)
    a = scene.start()
    pause_all(scene)  # the budget ceiling paused it mid-run
    assert scene.row(a).pause_reason == "at_utilization_limit"
    scene.quota.spent_5h = scene.quota.capacity_5h * 0.77  # inside the plain 20% reserve, not the widened 25%
    sub = submit_turn(scene.ctx, a, "and also this", kind="follow_up")
    assert (sub.outcome, sub.reason) == ("queued", "paused")
    scene.advance(minutes=0)
    assert scene.row(a).status == "waiting" and scene.row(a).pause_reason == "at_utilization_limit"
    assert scene.sweep().resumed == []  # the margin is not met: the sweep, its one owner, waits
    scene.quota.spent_5h = scene.quota.capacity_5h * 0.5
    assert scene.sweep().resumed == [a]
    assert scene.row(a).status == "running"
    nudge = render("text/pause_resume_nudge.j2", reason="at_utilization_limit")
    assert [t.prompt for t in scene.turns(a)] == ["work", nudge]  # the interrupted turn is picked up first
    scene.advance(minutes=61)
    assert [t.prompt for t in scene.turns(a)] == ["work", nudge, "and also this"]  # then the message, once


def test_a_human_message_to_a_paused_session_does_not_start_it_past_the_margin(engine, clock) -> None:
    scene = Scene(engine, clock)
    a = scene.start()
    pause_all(scene)
    scene.quota.spent_5h = scene.quota.capacity_5h * 0.77
    record_human_message(
        scene.ctx, a, actor="U1", surface="slack_thread", text="please look at the logs", roster={"U1": "member"}
    )
    scene.advance(minutes=0)  # the re-rank runs StartNow, which resumes through the pause's own rule
    assert scene.row(a).status == "waiting" and scene.row(a).pause_reason == "at_utilization_limit"
    assert len(scene.turns(a)) == 1


def test_a_follow_up_to_a_sleeping_session_consumes_its_wake(engine, clock) -> None:
    scene = Scene(engine, clock, turn_minutes=10)
    a = scene.start()
    wake_me_up_later(scene.ctx, a, clock.now() + timedelta(hours=1), "the wake's prompt")
    scene.advance(minutes=11)  # its turn ended: asleep until the wake
    assert submit_turn(scene.ctx, a, "look now", kind="follow_up").outcome == "started"
    row = scene.row(a)
    assert row.wake_at is None and row.wake_prompt is None
    assert scene.deferrer.next_run(wake_job_id(a)) is None
    scene.advance(hours=2)
    assert [t.prompt for t in scene.turns(a)] == ["work", "look now"]  # no second, wake turn


def test_an_automatic_turn_does_not_start_a_sleeping_session(engine, clock) -> None:
    scene = Scene(engine, clock, turn_minutes=10)
    a = scene.start()
    wake_me_up_later(scene.ctx, a, clock.now() + timedelta(hours=1), "the wake's prompt")
    scene.advance(minutes=11)
    sub = submit_turn(scene.ctx, a, "a poll found a comment", kind="poll")
    assert (sub.outcome, sub.reason) == ("queued", "asleep")
    scene.advance(minutes=30)
    assert [t.prompt for t in scene.turns(a)] == ["work"]
    scene.advance(hours=1)
    assert [t.prompt for t in scene.turns(a)] == ["work", "the wake's prompt", "a poll found a comment"]
