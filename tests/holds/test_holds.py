"""Turns and holds in virtual time (seed 001, "What hold does" … "Every turn is gated")."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from sqlmodel import select

from scheduler.engine.lifecycle import archive, recover
from scheduler.engine.recheck_sweep import recheck_sweep
from scheduler.engine.records import hold_job_id
from scheduler.engine.start_now import start_now
from scheduler.engine.turns import submit_turn
from scheduler.errors import Refused
from scheduler.pauses.sleep import wake_me_up_later
from scheduler.rules import ladder
from scheduler.store.db import session_scope
from scheduler.store.models import EnqueuedMessage, Turn
from scheduler.store.ranking import change_class
from tests.support.harness import build, new, row

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def fill(ctx, n):
    return [submit_turn(ctx, new(ctx, genesis="command", prompt=f"busy {i}"), f"busy {i}").session_id for i in range(n)]


@pytest.mark.parametrize(
    ("reason", "minutes"),
    [("at_utilization_limit", [10, 20, 40, 60, 60, 60]), ("fleet_at_cap", [10, 20, 30, 30, 30])],
)
def test_the_ladder_is_exact(reason, minutes) -> None:
    assert [ladder.next_delay(reason, n).total_seconds() / 60 for n in range(1, len(minutes) + 1)] == minutes


@pytest.mark.parametrize(
    ("reason", "expected"),
    [("at_utilization_limit", [10, 20, 40, 60, 60]), ("fleet_at_cap", [10, 20, 30, 30, 30])],
)
def test_consecutive_holds_walk_the_ladder_with_bounded_jitter(engine, clock, reason, expected) -> None:
    ctx, deferrer, workers, quota = build(engine, clock, max_sessions=1, turn_minutes=10_000)
    if reason == "at_utilization_limit":
        quota.spend_out()
    else:
        fill(ctx, 1)  # a priority session holds the only slot for the whole test
    sid = new(ctx, prompt="the real prompt")
    sub = submit_turn(ctx, sid, "the real prompt")
    assert sub.outcome == "held" and sub.reason == reason
    seen = []
    for _ in expected:
        s = row(ctx, sid)
        gap = s.hold_retry_at - s.hold_at
        seen.append(gap)
        deferrer.run_until(s.hold_retry_at)
    for gap, minutes in zip(seen, expected):
        assert timedelta(minutes=minutes) <= gap <= timedelta(minutes=minutes) + ladder.JITTER_MAX
    s = row(ctx, sid)
    assert s.hold_count == len(expected) + 1 and s.hold_prompt == "the real prompt" and s.status == "waiting"


def test_a_held_session_starts_with_its_recorded_prompt_and_the_ladder_resets(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock, max_sessions=2)
    quota.spend_out()
    sid = new(ctx)
    submit_turn(ctx, sid, "fix issue 12", [{"name": "shot.png"}])
    quota.spent_5h = 0
    deferrer.run_until(row(ctx, sid).hold_retry_at)
    s = row(ctx, sid)
    assert s.status == "running" and s.hold_reason is None and s.hold_count == 0
    assert workers.submitted[-1].prompt == "fix issue 12" and workers.submitted[-1].attachments == (
        {"name": "shot.png"},
    )


def test_every_turn_is_gated_not_just_the_first(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock, turn_minutes=5)
    sid = new(ctx)
    assert submit_turn(ctx, sid, "first").outcome == "started"
    deferrer.advance(timedelta(minutes=6))
    assert row(ctx, sid).status == "done"
    quota.spend_out()
    sub = submit_turn(ctx, sid, "a follow-up", kind="follow_up")
    assert sub.outcome == "held" and row(ctx, sid).hold_prompt == "a follow-up"


def test_clone_only_and_monitoring_pass_through(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock)
    quota.spend_out()
    assert submit_turn(ctx, new(ctx), "clone", kind="clone_only").outcome == "started"
    assert submit_turn(ctx, new(ctx), "attach", kind="monitoring").outcome == "started"


def test_a_second_refused_turn_is_queued_and_delivered_after_the_first(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock, turn_minutes=5)
    quota.spend_out()
    sid = new(ctx)
    submit_turn(ctx, sid, "first prompt")
    second = submit_turn(ctx, sid, "second prompt", kind="follow_up")
    assert second.outcome == "queued"
    assert deferrer.pending().count(hold_job_id(sid)) == 1
    quota.spent_5h = 0
    deferrer.run_until(row(ctx, sid).hold_retry_at)
    deferrer.advance(timedelta(minutes=6))
    prompts = [r.prompt for r in workers.submitted if r.session_id == sid]
    assert prompts == ["first prompt", "second prompt"]


def test_when_a_slot_frees_the_highest_precedence_held_session_takes_it(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock, max_sessions=1, turn_minutes=15)
    busy = fill(ctx, 1)[0]
    low = new(ctx, precedence=1)
    high = new(ctx, precedence=50)
    submit_turn(ctx, low, "low")  # held first: its alarm fires first
    deferrer.advance(timedelta(minutes=1))
    submit_turn(ctx, high, "high")
    assert row(ctx, low).hold_retry_at < row(ctx, high).hold_retry_at
    deferrer.advance(timedelta(minutes=15))  # the busy turn ends at 15m, before either alarm
    assert row(ctx, busy).status == "done"
    assert row(ctx, high).status == "running" and row(ctx, low).status == "waiting"


def test_start_now_never_creates_a_second_job(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock, max_sessions=1, turn_minutes=10_000)
    fill(ctx, 1)
    sid = new(ctx)
    submit_turn(ctx, sid, "wait for me")
    result = start_now(ctx, sid)
    assert result.shape == "held" and result.submission.outcome == "held"
    assert "still spot and the gate holds it again" in result.sentence
    assert [j for j in deferrer.pending() if j.startswith("recheck:")] == [hold_job_id(sid)]
    assert row(ctx, sid).hold_count == 1  # a person asked: back at the bottom of the ladder
    with session_scope(engine) as db:
        change_class(db, db.get(type(row(ctx, sid)), sid), "priority", now=clock.now())
    promoted = start_now(ctx, sid)
    assert promoted.submission.outcome == "started"
    assert hold_job_id(sid) not in deferrer.pending()
    assert len([r for r in workers.submitted if r.session_id == sid]) == 1


def test_start_now_shapes(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock, turn_minutes=5)
    fresh = new(ctx, prompt="from the form")
    assert start_now(ctx, fresh).shape == "never_run"
    assert workers.submitted[-1].prompt == "from the form"
    deferrer.advance(timedelta(minutes=6))
    assert row(ctx, fresh).status == "done"
    with pytest.raises(Refused) as done:  # finished, not stranded: a nudge would spend quota unasked
        start_now(ctx, fresh)
    assert str(done.value) == (
        f"session #{fresh} is done, so there is nothing queued to start; to continue it, reply to it with what to do "
        f"next "
        f"(reply {fresh} <text>, or in its thread)"
    )
    assert len(workers.submitted) == 1 and row(ctx, fresh).status == "done"
    with session_scope(engine) as db:  # a row left waiting after its turn, with nothing queued
        s = db.get(type(row(ctx, fresh)), fresh)
        s.status = "waiting"
        db.add(s)
    stranded = start_now(ctx, fresh)
    assert stranded.shape == "stranded" and workers.submitted[-1].prompt == "Continue where you left off."
    asleep = new(ctx)
    wake_me_up_later(ctx, asleep, clock.now() + timedelta(hours=2))
    with pytest.raises(Refused, match="asleep until"):
        start_now(ctx, asleep)


def test_the_sweep_rearms_a_lost_recheck_once_and_only_once(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock)
    quota.spend_out()
    sid = new(ctx)
    submit_turn(ctx, sid, "keep me")
    deferrer.cancel(hold_job_id(sid))  # the worker died with the re-check in memory
    clock.advance(timedelta(minutes=25))
    assert recheck_sweep(ctx) == [sid]
    assert recheck_sweep(ctx) == []  # the advanced stamp is its own idempotency key
    assert deferrer.pending().count(hold_job_id(sid)) == 1
    quota.spent_5h = 0
    deferrer.advance(timedelta(minutes=1))
    assert row(ctx, sid).status == "running" and workers.submitted[-1].prompt == "keep me"


def test_the_sweep_leaves_a_late_but_armed_hold_alone(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock)
    quota.spend_out()
    sid = new(ctx)
    submit_turn(ctx, sid, "x")
    clock.advance(timedelta(minutes=40))  # overdue, but its alarm is still queued
    assert recheck_sweep(ctx) == []


def test_the_sweep_leaves_a_recheck_running_now_alone(engine, clock) -> None:
    """APScheduler takes a one-shot alarm out of its store when it starts running it: at start-up
    every overdue re-check is in flight while the first sweep looks for lost ones."""
    ctx, deferrer, workers, quota = build(engine, clock)
    quota.spend_out()
    sid = new(ctx)
    submit_turn(ctx, sid, "x")
    deferrer.cancel(hold_job_id(sid))  # taken out of the store: it is running now
    clock.advance(timedelta(minutes=25))
    seen: list[list[int]] = []
    recheck = ctx.jobs["recheck"]

    def running(ctx_, session_id):  # the sweep runs while this re-check is in flight
        seen.append(recheck_sweep(ctx_))
        return recheck(ctx_, session_id)

    ctx.jobs = {**ctx.jobs, "recheck": running}
    ctx.run_job("recheck", sid)
    assert seen == [[]]
    assert deferrer.pending().count(hold_job_id(sid)) == 1  # the re-check re-armed itself, once


def test_the_sweep_leaves_a_held_session_asleep_on_a_wake_alone(engine, clock) -> None:
    """Its alarm stood down on purpose; the wake asks again. Calling it lost re-armed it every pass."""
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=1, turn_minutes=600)
    busy, held = new(ctx), new(ctx)
    submit_turn(ctx, busy, "x")
    assert submit_turn(ctx, held, "y").outcome == "held"
    wake_me_up_later(ctx, held, clock.now() + timedelta(hours=3))
    rearmed: list[int] = []
    for _ in range(30):  # the five-minute sweep for two and a half hours
        deferrer.advance(timedelta(minutes=5))
        rearmed += recheck_sweep(ctx)
    assert held not in rearmed


def test_the_sweep_rearms_at_most_ten_a_pass_spread_over_three_minutes(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock)
    quota.spend_out()
    ids = [new(ctx) for _ in range(13)]
    for sid in ids:
        submit_turn(ctx, sid, "x")
        deferrer.cancel(hold_job_id(sid))
    clock.advance(timedelta(minutes=30))
    first = recheck_sweep(ctx)
    assert len(first) == 10
    times = sorted(deferrer.next_run(hold_job_id(s)) for s in first)
    assert times[-1] - times[0] <= timedelta(minutes=3)


def test_replayed_attachments_whose_files_vanished_are_dropped(engine, clock, tmp_path) -> None:
    ctx, deferrer, workers, quota = build(engine, clock)
    quota.spend_out()
    kept, gone = tmp_path / "kept.png", tmp_path / "gone.png"
    kept.write_bytes(b"x")
    gone.write_bytes(b"x")
    sid = new(ctx)
    submit_turn(ctx, sid, "look", [{"path": str(kept)}, {"path": str(gone)}])
    gone.unlink()
    quota.spent_5h = 0
    deferrer.run_until(row(ctx, sid).hold_retry_at)
    assert workers.submitted[-1].attachments == ({"path": str(kept)},)


def test_archiving_a_held_session_ends_it(engine, clock, caplog) -> None:
    ctx, deferrer, workers, quota = build(engine, clock)
    quota.spend_out()
    sid = new(ctx)
    submit_turn(ctx, sid, "x")
    archive(ctx, sid)
    with caplog.at_level(logging.INFO, logger="pacer.queue_pass"):
        deferrer.advance(timedelta(hours=3))
    s = row(ctx, sid)
    assert s.status == "archived" and s.hold_reason == "at_utilization_limit"  # the history stays
    assert hold_job_id(sid) not in deferrer.pending()
    assert "archived: its re-check stops here" in caplog.text
    with pytest.raises(Refused, match="archived"):
        submit_turn(ctx, sid, "more")


def test_a_bookkeeping_turn_is_refused_never_queued(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock)
    quota.spend_out()
    sid = new(ctx, bookkeeping=True)
    sub = submit_turn(ctx, sid, "summarize #3")
    assert sub.outcome == "refused" and row(ctx, sid).status == "archived"
    assert hold_job_id(sid) not in deferrer.pending()


def test_a_promotion_overtakes_the_hold(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock)
    quota.spend_out()
    sid = new(ctx)
    submit_turn(ctx, sid, "x")
    with session_scope(engine) as db:
        change_class(db, db.get(type(row(ctx, sid)), sid), "priority", now=clock.now())
    deferrer.run_until(row(ctx, sid).hold_retry_at)
    s = row(ctx, sid)
    assert s.status == "running" and s.hold_reason is None


def test_a_pause_outranks_precedence(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock, max_sessions=1, turn_minutes=15)
    fill(ctx, 1)
    sleeper = new(ctx, precedence=100)
    other = new(ctx, precedence=1)
    submit_turn(ctx, sleeper, "top")
    submit_turn(ctx, other, "second")
    wake_me_up_later(ctx, sleeper, clock.now() + timedelta(hours=3), "wake prompt")
    deferrer.advance(timedelta(minutes=16))  # the slot frees
    assert row(ctx, other).status == "running" and row(ctx, sleeper).status == "waiting"
    deferrer.advance(timedelta(hours=3))
    assert any(r.prompt == "wake prompt" for r in workers.submitted)


def test_recovery_after_a_crash_replays_running_turns_and_first_turns(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock)
    running = new(ctx)
    submit_turn(ctx, running, "was running")
    new(ctx, prompt="never started")
    # The process dies: the in-memory pool and alarms are gone; the rows remain.
    ctx2, deferrer2, workers2, _ = build(engine, clock)
    counts = recover(ctx2)
    assert counts == {"interrupted": 1, "first_turns": 1}
    deferrer2.advance(timedelta(seconds=1))
    prompts = sorted(r.prompt for r in workers2.submitted)
    assert prompts == ["never started", "was running"]
    with session_scope(engine) as db:
        assert db.exec(select(Turn).where(Turn.outcome == "interrupted")).one().prompt == "was running"
        assert db.exec(select(EnqueuedMessage)).all() == []
