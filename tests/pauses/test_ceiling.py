"""The budget ceiling sweep in virtual time (seed 001, "The budget is a ceiling", "What a pause
does", "What brings it back", "Precedence decides who gets the headroom back")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler import wiring
from scheduler.engine.lifecycle import archive, recover
from scheduler.engine.start_now import start_now
from scheduler.engine.turns import submit_turn
from scheduler.errors import InvalidInput, NotFound, Refused
from scheduler.jobs import targets
from scheduler.pauses.ceiling import MAX_RESUMES_PER_SWEEP, paused_figures
from scheduler.pauses.parking import pause_into_spot_queue
from scheduler.pauses.sleep import wake_me_up_later
from scheduler.rules.gate import Ceiling
from scheduler.rules.waiting import waiting_reason
from scheduler.store.db import session_scope
from scheduler.store.models import Session
from scheduler.store.ranking import change_class
from tests.support.harness import build
from tests.support.sweeping import Scene

NUDGE = "pick up where you left off"


def promote(scene: Scene, sid: int, cls: str = "priority") -> None:
    with session_scope(scene.ctx.engine) as db:
        change_class(db, db.get(Session, sid), cls, now=scene.clock.now())


def test_the_sweep_is_registered_every_five_minutes() -> None:
    assert wiring.PERIODIC["ceiling_sweep"] == timedelta(minutes=5)
    assert "ceiling_sweep" in targets() and "promote_after_message" in targets()


def test_a_spent_budget_pauses_every_running_spot_turn_and_nothing_else(engine, clock) -> None:
    scene = Scene(engine, clock, max_sessions=8)
    a = scene.start(prompt="a's work")
    b = scene.start(precedence=50)
    p = scene.start(cls="priority")
    codex = scene.start(runtime="codex")
    fork = scene.start(bookkeeping=True)
    scene.quota.spent_5h = 900  # over the 800 spot budget: the reserve is being eaten
    report = scene.sweep()
    assert sorted(report.paused) == sorted([a, b]) and report.ceiling is Ceiling.SPOT_BUDGET
    for sid in (a, b):
        s = scene.row(sid)
        assert (s.status, s.pause_reason, s.paused_by, s.pause_count) == (
            "waiting",
            "at_utilization_limit",
            "spot_quota",
            1,
        )
        assert s.pause_at == clock.now()
        assert s.pause_detail.startswith(
            "Held by the spot gate's budget: the 5-hour window has no non-reserved budget"
        )
        assert scene.turns(sid)[-1].status == "halted"
    assert scene.running_ids() == {p, codex, fork}  # priority, no-quota runtimes, bookkeeping
    paused = {c["session_id"]: c for c in scene.events("paused")}
    assert set(paused) == {a, b} and "Paused mid-run for quota headroom" in paused[a]["sentence"]


def test_a_fleet_ahead_of_its_curve_is_throttled_at_the_door_never_interrupted(engine, clock) -> None:
    scene = Scene(engine, clock, max_sessions=4, burn=0.5)
    a, b = scene.start(), scene.start()
    scene.quota.spent_5h = 700  # $100 of spot budget over 240 minutes: $0.42/min against $1.00/min
    third = submit_turn(scene.ctx, scene.session(), "more")
    assert third.outcome == "held" and third.decision.ceiling is Ceiling.PACING_CURVE
    report = scene.sweep()
    assert report.paused == [] and {a, b} <= scene.running_ids()


def test_a_full_fleet_pauses_nothing(engine, clock) -> None:
    scene = Scene(engine, clock, max_sessions=3)
    ids = [scene.start() for _ in range(3)]
    scene.policy(max_sessions=1)  # lowered under a running fleet: holds the next start only
    assert scene.sweep().paused == [] and scene.running_ids() == set(ids)


def pause_all(scene: Scene) -> None:
    scene.quota.spent_5h = 900
    scene.sweep()
    scene.quota.spent_5h = 0


def test_resumes_go_highest_precedence_first_oldest_pause_within_a_tie_five_a_pass(engine, clock) -> None:
    scene = Scene(engine, clock, max_sessions=10)
    x, y = scene.start(precedence=0), scene.start(precedence=10)
    pause_all(scene)
    scene.advance(minutes=1)
    z, w, v, u, t = (scene.start(precedence=p) for p in (0, 10, 5, 0, 0))
    pause_all(scene)
    assert set(scene.running_ids()) == set()
    report = scene.sweep()
    assert (
        report.resumed == [y, w, v, x, z] and report.deferred == [u, t] and len(report.resumed) == MAX_RESUMES_PER_SWEEP
    )
    nxt = scene.sweep()  # sessions past the batch keep their place at the front of the next one
    assert nxt.resumed == [u, t]
    assert all(NUDGE in r.prompt for r in scene.workers.submitted[-7:])


def test_never_more_resumes_than_free_slots(engine, clock) -> None:
    scene = Scene(engine, clock, max_sessions=3)
    a, b = scene.start(precedence=2), scene.start(precedence=1)
    pause_all(scene)
    scene.start(cls="priority")
    scene.start(cls="priority")
    report = scene.sweep()
    assert report.batch == 1 and report.resumed == [a] and report.deferred == [b]


def test_one_resume_when_the_pace_was_waived_rather_than_passed(engine, clock) -> None:
    scene = Scene(engine, clock, max_sessions=5, burn=0.5)
    scene.quota.capacity_7d = 100_000  # only the 5-hour window binds here
    ids = [scene.start() for _ in range(3)]
    scene.quota.spent_5h = 900
    scene.sweep()
    # $50 left in a reserve widened to 25% over 240 minutes is $0.21/min; one session burns
    # $0.50/min. Only the idle-fleet waiver lets anything back at all.
    scene.quota.spent_5h = 700
    report = scene.sweep()
    assert report.waived and report.batch == 1 and report.resumed == [ids[0]] and report.deferred == ids[1:]
    scene.advance(minutes=5)
    assert scene.sweep().resumed == []  # spot work is in flight again: paced normally, and held


def test_a_fleet_dipping_just_under_the_line_does_not_resume_until_the_widened_reserve_is_free(engine, clock) -> None:
    scene = Scene(engine, clock, max_sessions=5)
    a = scene.start()
    scene.quota.spent_5h = 900
    scene.sweep()
    scene.quota.spent_5h = 760  # under the 20% reserve's $800, over the 25% margin's $750
    report = scene.sweep()
    assert report.resumed == [] and report.held == [a]
    assert scene.row(a).pause_reason == "at_utilization_limit" and scene.row(a).hold_reason is None
    fresh = submit_turn(scene.ctx, scene.session(), "new work")
    assert fresh.outcome == "started"  # admission uses the plain reserve; the margin is for resumes
    scene.quota.spent_5h = 690
    assert scene.sweep().resumed == [a]


def test_near_the_rollover_only_the_burn_before_it_counts_against_the_window(engine, clock) -> None:
    """Five minutes before the rollover, two turns at $0.50/min will spend $5 more in this window,
    not the ten minutes' $10: $795 of an $800 spot budget leaves them running to the rollover,
    where the old ten-minute reading paused them and left the last $5 unspent."""
    scene = Scene(engine, clock, max_sessions=5, burn=0.5)
    a, b = scene.start(), scene.start()
    scene.quota.reset_5h = clock.now() + timedelta(minutes=5)
    scene.quota.spent_5h = 795
    report = scene.sweep()
    assert report.paused == [] and {a, b} <= scene.running_ids()
    scene.quota.spent_5h = 795.5  # $5 more would now cross the line: the budget is a ceiling
    assert sorted(scene.sweep().paused) == sorted([a, b])


def test_a_reading_from_before_the_rollover_pauses_nothing_after_it(engine, clock) -> None:
    """The window rolled over a minute ago; a reading that still carries its reset (a reused
    one, a slow source) is last window's spend, and the window now open has spent nothing."""
    scene = Scene(engine, clock, max_sessions=5, burn=0.5)
    a = scene.start()
    scene.quota.reset_5h = clock.now() - timedelta(minutes=1)
    scene.quota.spent_5h = 900
    assert scene.sweep().paused == [] and a in scene.running_ids()
    assert submit_turn(scene.ctx, scene.session(), "new work").outcome == "started"


def test_a_sleeper_promoted_to_priority_resumes_on_the_next_pass_whatever_the_windows_say(engine, clock) -> None:
    scene = Scene(engine, clock)
    a = scene.start()
    scene.quota.spent_5h = 900
    scene.sweep()
    promote(scene, a)
    report = scene.sweep()
    assert report.resumed == [a] and a in scene.running_ids() and scene.row(a).pause_reason is None


def test_a_session_with_a_wake_still_ahead_is_left_alone(engine, clock) -> None:
    scene = Scene(engine, clock)
    a = scene.start()
    pause_all(scene)
    wake_me_up_later(scene.ctx, a, clock.now() + timedelta(hours=2), "the wake's own prompt")
    promote(scene, a)  # not even a promotion starts it before its wake
    report = scene.sweep()
    assert report.resumed == [] and report.held == [a]
    assert "It also has a wake at" in waiting_reason(scene.row(a), clock.now()).others[0].mechanism.sentence
    scene.advance(hours=2)
    assert scene.workers.submitted[-1].prompt == "the wake's own prompt" and scene.row(a).pause_reason is None


def test_recovery_never_touches_a_spot_quota_pause(engine, clock, monkeypatch) -> None:
    scene = Scene(engine, clock)
    a = scene.start(prompt="interrupted work")
    monkeypatch.setattr(scene.workers, "halt", lambda turn_id: False)  # the process dies before the halt lands
    scene.quota.spent_5h = 900
    scene.sweep()
    # The process is gone: a new one recovers from the rows alone.
    ctx2, deferrer2, workers2, quota2 = build(engine, clock, wired=True)
    quota2.spent_5h = 900  # the same window: still spent
    recover(ctx2)
    deferrer2.advance(timedelta(minutes=30))  # the recovery re-check fires and stands down
    s = scene.row(a)
    assert workers2.submitted == [] and s.status == "waiting" and s.pause_reason == "at_utilization_limit"
    quota2.spent_5h = 0  # the rollover: the sweep's resume, through the gate, brings it back
    report = ctx2.run_job("ceiling_sweep")
    assert report.resumed == [a] and workers2.submitted[-1].prompt == "interrupted work"


def test_start_now_resumes_a_paused_session_through_the_sweeps_own_door(engine, clock) -> None:
    scene = Scene(engine, clock)
    a = scene.start()
    scene.quota.spent_5h = 900
    scene.sweep()
    scene.quota.spent_5h = 760
    result = start_now(scene.ctx, a)
    assert result.shape == "paused" and result.submission.outcome == "held"
    s = scene.row(a)
    assert s.pause_reason == "at_utilization_limit" and s.hold_reason is None  # the pause keeps its owner
    scene.quota.spent_5h = 0
    result = start_now(scene.ctx, a)
    assert result.shape == "paused" and result.submission.outcome == "started"
    assert NUDGE in scene.workers.submitted[-1].prompt


def test_a_message_queued_behind_the_paused_turn_follows_the_nudge(engine, clock) -> None:
    scene = Scene(engine, clock, turn_minutes=30)
    a = scene.start(prompt="first")
    assert submit_turn(scene.ctx, a, "second", kind="follow_up").outcome == "queued"
    pause_all(scene)
    scene.sweep()
    scene.advance(minutes=31)
    prompts = [r.prompt for r in scene.workers.submitted if r.session_id == a]
    assert prompts[0] == "first" and NUDGE in prompts[1] and prompts[2] == "second"


def test_the_pause_is_visible_with_why_and_what_brings_it_back(engine, clock) -> None:
    scene = Scene(engine, clock)
    a = scene.start()
    scene.quota.spent_5h = 900
    scene.sweep()
    reason = waiting_reason(scene.row(a), clock.now())
    assert reason.headline.kind == "pause" and reason.headline.owner == "the ceiling sweep's resume"
    assert "no non-reserved budget" in reason.headline.sentence
    assert "reserve widened by 5 points and a slot is free" in reason.headline.sentence
    with session_scope(engine) as db:
        assert paused_figures(db) == {"asleep": 1, "preempted": 0, "marked": 0, "parked": 0}


@pytest.mark.parametrize("gating", [False])
def test_with_gating_off_nothing_is_paused(engine, clock, gating) -> None:
    scene = Scene(engine, clock)
    a = scene.start()
    scene.policy(gating_enabled=gating)
    scene.quota.spent_5h = 990
    assert scene.sweep().paused == [] and a in scene.running_ids()


# --------------------------------------------------------------------------- joining the queue on purpose


def test_parking_an_idle_session_hands_it_to_the_sweep_with_its_own_prompt(engine, clock) -> None:
    scene = Scene(engine, clock, turn_minutes=5)
    a = scene.start(precedence=7)
    scene.advance(minutes=6)
    assert scene.row(a).status == "done"
    parked = pause_into_spot_queue(scene.ctx, a, resume_prompt="now do the second half")
    s = scene.row(a)
    assert (s.status, s.pause_reason, s.paused_by, s.pause_count, s.wake_at, s.precedence) == (
        "waiting", "user_spot_queue", "spot_quota", 0, None, 7)
    assert "parked in the spot queue at precedence 7" in parked.sentence
    assert "Parked in the spot queue on purpose" in waiting_reason(s, clock.now()).headline.sentence
    with session_scope(engine) as db:
        assert paused_figures(db) == {"asleep": 0, "preempted": 0, "marked": 0, "parked": 1}
    assert scene.sweep().resumed == [a]
    assert scene.workers.submitted[-1].prompt == "now do the second half"  # in place of the nudge


def test_parking_a_priority_session_sets_it_to_spot_and_promoting_it_brings_it_back(engine, clock) -> None:
    scene = Scene(engine, clock, turn_minutes=5)
    p = scene.start(cls="priority", precedence=3)
    scene.advance(minutes=6)
    scene.quota.spent_5h = 900  # the spot budget is gone, so only a promotion can resume it
    result = pause_into_spot_queue(scene.ctx, p)
    assert result.was_priority and scene.row(p).scheduling_class == "spot" and scene.row(p).precedence == 3
    assert scene.sweep().resumed == []
    promote(scene, p)
    assert scene.sweep().resumed == [p] and "it is your turn again" in scene.workers.submitted[-1].prompt


def test_parking_cancels_an_unfired_wake(engine, clock) -> None:
    scene = Scene(engine, clock, turn_minutes=5)
    a = scene.session()
    wake_me_up_later(scene.ctx, a, clock.now() + timedelta(hours=3))
    result = pause_into_spot_queue(scene.ctx, a)
    assert result.cancelled_wake is not None and scene.row(a).wake_at is None
    assert f"wake:{a}" not in scene.deferrer.pending()


def test_a_running_session_parks_at_its_turn_end_or_is_halted_on_request(engine, clock) -> None:
    scene = Scene(engine, clock, turn_minutes=20)
    graceful, halted = scene.start(), scene.start()
    pause_into_spot_queue(scene.ctx, graceful)
    pause_into_spot_queue(scene.ctx, halted, halt=True)
    assert graceful in scene.running_ids() and halted not in scene.running_ids()
    assert scene.row(halted).pause_count == 1 and scene.turns(halted)[-1].status == "halted"
    scene.advance(minutes=21)
    s = scene.row(graceful)
    assert (s.status, s.pause_reason, s.pending_sleep, s.pause_count) == ("waiting", "user_spot_queue", False, 0)


def test_start_now_on_a_parked_session_takes_the_same_door(engine, clock) -> None:
    scene = Scene(engine, clock, turn_minutes=5)
    a = scene.start()
    scene.advance(minutes=6)
    pause_into_spot_queue(scene.ctx, a, resume_prompt="resume text")
    assert start_now(scene.ctx, a).submission.outcome == "started"
    assert scene.workers.submitted[-1].prompt == "resume text" and scene.row(a).pause_reason is None


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"resume_prompt": "   "}, InvalidInput, "resume_prompt"),
        ({"resume_prompt": "x" * 100_001}, InvalidInput, "resume_prompt"),
        ({"halt": "yes"}, InvalidInput, "halt"),
    ],
)
def test_parking_bad_input_changes_nothing(engine, clock, kwargs, error, field) -> None:
    scene = Scene(engine, clock)
    a = scene.start()
    with pytest.raises(error) as info:
        pause_into_spot_queue(scene.ctx, a, **kwargs)
    assert info.value.field == field and scene.row(a).pause_reason is None and a in scene.running_ids()


def test_parking_an_unknown_or_archived_session_is_refused(engine, clock) -> None:
    scene = Scene(engine, clock)
    with pytest.raises(NotFound):
        pause_into_spot_queue(scene.ctx, 404)
    a = scene.session()
    archive(scene.ctx, a)
    with pytest.raises(Refused, match="archived"):
        pause_into_spot_queue(scene.ctx, a)
    assert scene.row(a).pause_reason is None


def test_a_priority_start_asks_the_ceiling_at_once_whether_spot_work_would_cross(engine, clock) -> None:
    """P15, the predictive ceiling: a priority turn's burn can carry running spot work over the
    spot budget before the next sweep (the saturated example crossed by $0.32 that way). Its start
    asks the sweep's pause question at once, so the spot work stops before the line, not after."""
    scene = Scene(engine, clock, max_sessions=5, burn=0.5)
    a, b = scene.start(), scene.start()
    scene.quota.reset_5h = clock.now() + timedelta(minutes=4)
    scene.quota.spent_5h = 795.5  # $800 spot budget: two spot turns' $4 to the rollover fits
    assert scene.sweep().paused == []
    scene.start(cls="priority")  # a third $0.50/min makes it $6: over the line before the rollover
    scene.advance(seconds=1)
    assert scene.running_ids().isdisjoint({a, b})
    assert {scene.row(a).pause_reason, scene.row(b).pause_reason} == {"at_utilization_limit"}
