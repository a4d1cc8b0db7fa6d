"""Concurrency groups and prerequisites (seed 002, "One run per project", "Declared
prerequisites are honoured")."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from scheduler.engine.claims import parse_group_limit
from scheduler.engine.lifecycle import archive
from scheduler.engine.start_now import start_now
from scheduler.engine.turns import submit_turn
from scheduler.errors import InvalidInput
from scheduler.holds.groups import repository_group
from scheduler.holds.prerequisites import set_issue_state
from scheduler.holds.queue import resume_queue
from scheduler.pauses.sleep import wake_me_up_later
from scheduler.ports import Outcome
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Trigger
from scheduler.store.prerequisite_rows import (
    PrerequisiteRef,
    parse_prerequisites,
    record_prerequisites,
)
from tests.support.harness import build, new, row
from tests.support.holdkit import finish

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

API = repository_group("Acme/API")


def trigger_with(ctx, config) -> int:
    with session_scope(ctx.engine) as db:
        trigger = Trigger(name="issues", kind="github_issue", config=config, created_at=ctx.clock.now())
        db.add(trigger)
        db.flush()
        return trigger.id or 0


def test_one_run_at_a_time_per_group_and_the_next_starts_by_itself(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=5, turn_minutes=15, wired=True)
    first = new(ctx, title="Fix login", concurrency_group=API)
    second = new(ctx, title="Add docs", concurrency_group=API)
    elsewhere = new(ctx, concurrency_group=repository_group("acme/web"))
    submit_turn(ctx, first, "a")
    sub = submit_turn(ctx, second, "b")
    assert API == "repo:acme/api"
    assert sub.reason == "concurrency_group"
    assert (
        sub.sentence
        == f"#{first} “Fix login” is running in repo:acme/api; one run at a time per group, because its sessions share one working tree."
    )
    assert submit_turn(ctx, elsewhere, "c").outcome == "started"  # a busy group blocks no other
    deferrer.advance(timedelta(minutes=15))
    assert row(ctx, second).status == "running"


def test_a_manual_start_into_a_busy_group_is_refused_politely_and_stays_queued(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=5, wired=True)
    first = new(ctx, title="Fix login", concurrency_group=API)
    pressed = new(ctx, genesis="command", concurrency_group=API)  # priority: the gate would allow it
    submit_turn(ctx, first, "a")
    result = start_now(ctx, pressed)
    assert result.shape == "never_run" and result.submission.outcome == "held"
    assert result.sentence == (
        f"#{pressed} was not started and stays queued: #{first} “Fix login” is running in repo:acme/api; "
        "one run at a time per group, because its sessions share one working tree."
    )
    assert row(ctx, pressed).status == "waiting" and row(ctx, pressed).hold_prompt == "do it"


def test_a_trigger_sets_how_many_run_per_group(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=5, wired=True)
    trigger = trigger_with(ctx, {"group_limit": 2})
    ids = [new(ctx, title=f"t{i}", concurrency_group=API, trigger_id=trigger) for i in range(3)]
    subs = [submit_turn(ctx, sid, "x") for sid in ids]
    assert [s.outcome for s in subs] == ["started", "started", "held"]
    assert subs[2].sentence.startswith(
        f"#{ids[0]} “t0” and #{ids[1]} “t1” are running in repo:acme/api; 2 runs at a time per group"
    )


@pytest.mark.parametrize("value", [0, -1, "2", True, 101, 1.5])
def test_a_bad_group_limit_is_refused_with_the_rule(value) -> None:
    with pytest.raises(InvalidInput, match=r"group_limit: .* is not allowed; give a whole number from 1 to 100"):
        parse_group_limit(value)


def test_a_bad_stored_group_limit_falls_back_to_one_with_a_log_line(engine, clock, caplog) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=5, wired=True)
    trigger = trigger_with(ctx, {"group_limit": "lots"})
    a, b = (new(ctx, concurrency_group=API, trigger_id=trigger) for _ in range(2))
    submit_turn(ctx, a, "x")
    with caplog.at_level(logging.WARNING, logger="pacer.groups"):
        assert submit_turn(ctx, b, "y").reason == "concurrency_group"
    assert "group_limit: 'lots' is not allowed" in caplog.text and "using 1" in caplog.text


def test_a_session_asleep_on_a_declared_wait_keeps_its_groups_claim(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=5, turn_minutes=10, wired=True)
    sleeper = new(ctx, title="Wait for CI", concurrency_group=API)
    submit_turn(ctx, sleeper, "push and wait")
    deferrer.advance(timedelta(minutes=5))
    wake_me_up_later(ctx, sleeper, clock.now() + timedelta(hours=1), "check CI")  # asked mid-turn
    deferrer.advance(timedelta(minutes=5))  # the turn ends and it sleeps
    assert row(ctx, sleeper).status == "waiting"
    other = new(ctx, concurrency_group=API)
    sub = submit_turn(ctx, other, "x")
    assert (
        sub.reason == "concurrency_group" and "(asleep on a declared wait until 2026-11-02 10:05 UTC)" in sub.sentence
    )
    deferrer.advance(timedelta(hours=1, minutes=10))  # it wakes, runs its turn, and the group frees
    assert row(ctx, other).status in ("running", "done")


# --------------------------------------------------------------------------- prerequisites


@pytest.mark.parametrize(
    ("text", "refs"),
    [
        ("depends on #12", [PrerequisiteRef(12)]),
        (
            "Depends on: #12, #13 and Acme/Web#4.",
            [PrerequisiteRef(12), PrerequisiteRef(13), PrerequisiteRef(4, "acme/web")],
        ),
        ("first @#7, then @acme/api#8", [PrerequisiteRef(7), PrerequisiteRef(8, "acme/api")]),
        ("@#7 and again depends on #7", [PrerequisiteRef(7)]),
        ("fixes #12; see #13", []),  # a plain mention is not a prerequisite
        ("mail bob@#3 or depends on nothing", []),
        ("depends on #0", []),
    ],
)
def test_prerequisites_are_read_from_depends_on_and_at_mentions(text, refs) -> None:
    assert parse_prerequisites(text) == refs


def test_an_issue_names_issues_of_its_repository_and_a_message_names_sessions(db, clock) -> None:
    issue = Session(genesis="github_issue", source={"repository": "Acme/API", "issue": 20}, created_at=clock.now())
    message = Session(genesis="slack", created_at=clock.now())
    db.add_all([issue, message])
    db.flush()
    rows = record_prerequisites(db, issue, "depends on #12 and #20, @other/repo#3")
    assert [(r.target_kind, r.target_ref) for r in rows] == [
        ("issue", "acme/api#12"),
        ("issue", "other/repo#3"),
    ]  # not itself
    assert len(record_prerequisites(db, issue, "depends on #12")) == 2  # a redelivery records nothing twice
    rows = record_prerequisites(db, message, f"@#{issue.id} @#{message.id}")
    assert [(r.target_kind, r.target_ref) for r in rows] == [("session", str(issue.id))]


def waiter_on(ctx, text, **kw) -> int:
    sid = new(ctx, **kw)
    with session_scope(ctx.engine) as db:
        record_prerequisites(db, db.get(Session, sid), text)
    return sid


def test_blocked_does_not_satisfy_a_prerequisite_and_canceled_does(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=5, wired=True)
    target = new(ctx, title="Migrate")
    submit_turn(ctx, target, "migrate")
    waiter = waiter_on(ctx, f"depends on #{target}")
    sub = submit_turn(ctx, waiter, "after")
    assert sub.sentence == f"Waits on #{target} (running) until it is done, canceled or closed."
    finish(ctx, workers, deferrer, target, Outcome.CREDITS_EXHAUSTED)  # blocked at once
    resume_queue(ctx, actor="U_OPS")  # the credits hold lifted: what remains is the prerequisite
    deferrer.advance(timedelta(minutes=1))
    assert row(ctx, target).status == "blocked" and row(ctx, waiter).status == "waiting"
    assert row(ctx, waiter).hold_sentence == f"Waits on #{target} (blocked) until it is done, canceled or closed."
    archive(ctx, target)  # canceled: the archive asks for a queue pass by itself
    deferrer.advance(timedelta(0))
    assert row(ctx, waiter).status == "running"


def test_a_missing_target_counts_for_nothing(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, wired=True)
    assert submit_turn(ctx, waiter_on(ctx, "depends on #999"), "x").outcome == "started"
    orphan = waiter_on(ctx, "depends on #41", source={"repository": "acme/api", "issue": 40})
    assert submit_turn(ctx, orphan, "x").outcome == "started"  # no session names acme/api#41


def test_an_issue_prerequisite_follows_its_session_and_a_closed_issue_satisfies_it(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=5, turn_minutes=60, wired=True)
    target = new(ctx, source={"repository": "acme/api", "issue": 12})
    submit_turn(ctx, target, "fix 12")
    waiter = waiter_on(ctx, "depends on #12", source={"repository": "acme/api", "issue": 13})
    sub = submit_turn(ctx, waiter, "then 13")
    assert sub.sentence == f"Waits on acme/api#12 (#{target}, running) until it is done, canceled or closed."
    assert set_issue_state(ctx, "Acme/API", 12, "closed") == 1  # closed by hand on GitHub
    deferrer.advance(timedelta(0))
    assert row(ctx, waiter).status == "running"
    with pytest.raises(InvalidInput, match="state: 'shut' is not an issue state"):
        set_issue_state(ctx, "acme/api", 12, "shut")


def test_finishing_the_prerequisite_moves_the_queue_by_itself_and_a_press_skips_it(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=5, turn_minutes=25, wired=True)
    target = new(ctx)
    submit_turn(ctx, target, "first")
    waiter = waiter_on(ctx, f"@#{target}")
    pressed = waiter_on(ctx, f"@#{target}")
    submit_turn(ctx, waiter, "second")
    assert start_now(ctx, pressed).submission.outcome == "started"  # seed 002: a press ignores order
    deferrer.advance(timedelta(minutes=25))
    assert row(ctx, target).status == "done" and row(ctx, waiter).status == "running"
