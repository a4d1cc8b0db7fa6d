"""Queue holds from runner outcomes (seed 002, "The holds"): one scenario per reason, each
asserting the label and exact sentence `holds` prints, its "Resumes at", and whether Resume is
offered — then that Resume does (or refuses) what the table says."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from scheduler.engine.start_now import start_now
from scheduler.engine.turns import submit_turn
from scheduler.errors import Refused
from scheduler.holds.queue import resume_queue, sign_in_verified
from scheduler.ports import Outcome
from scheduler.store.db import session_scope
from scheduler.store.models import QueueHold, Session
from scheduler.store.prerequisite_rows import record_prerequisites
from scheduler.wiring import run_periodic
from tests.support.harness import build, new, row
from tests.support.holdkit import Heard, finish, holds, holds_text

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

RATE_SENTENCE = "The provider returned a rate limit. Sessions already running are not affected."


def only_queue_hold(ctx):
    view = holds(ctx)
    assert len(view.queue_holds) == 1, view.queue_holds
    return view.queue_holds[0]


def test_a_rate_limit_holds_the_queue_five_minutes_without_spending_a_retry(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=3, turn_minutes=30, wired=True)
    heard = Heard(ctx)
    a, b = new(ctx, title="Fix login"), new(ctx, title="Add docs")
    submit_turn(ctx, a, "fix the login form")
    t0 = clock.now()
    finish(ctx, workers, deferrer, a, Outcome.RATE_LIMITED, error="429 Too Many Requests")

    hold = only_queue_hold(ctx)
    assert (hold.label, hold.sentence, hold.group) == ("provider rate limit", RATE_SENTENCE, None)
    assert hold.resumes_at == t0 + timedelta(minutes=5) and hold.resume_offered
    text = holds_text(ctx)
    assert (
        "  provider rate limit (whole queue) · 1 waiting · since 2026-11-02 09:00 UTC · Resumes at 2026-11-02 09:05 UTC"
        in text
    )
    assert f"      {RATE_SENTENCE}\n      Resume: resume" in text

    s = row(ctx, a)
    assert s.status == "waiting" and s.hold_reason == "queue_hold" and s.consecutive_failures == 0
    assert s.hold_prompt == "fix the login form" and s.hold_retry_at == hold.resumes_at
    sub = submit_turn(ctx, b, "write the docs")
    assert sub.outcome == "held" and sub.reason == "queue_hold" and sub.retry_at == hold.resumes_at
    assert sub.sentence == f"The queue is paused (provider rate limit): {RATE_SENTENCE}"
    assert [n["hold"].reason for n in heard.of("queue_hold")] == ["rate_limit"]

    deferrer.run_until(t0 + timedelta(minutes=5))  # it lifts by itself; the queue moves
    assert holds(ctx).queue_holds == []
    assert row(ctx, a).status == "running" and row(ctx, b).status == "running"
    assert [r.prompt for r in workers.submitted if r.session_id == a] == ["fix the login form"] * 2


def test_consecutive_rate_limits_double_the_wait_to_a_sixty_minute_cap(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, turn_minutes=30, wired=True)
    heard = Heard(ctx)
    a = new(ctx)
    submit_turn(ctx, a, "x")
    waits = []
    for _ in range(6):
        t = clock.now()
        finish(ctx, workers, deferrer, a, Outcome.RATE_LIMITED)
        resumes_at = only_queue_hold(ctx).resumes_at
        waits.append((resumes_at - t).total_seconds() / 60)
        deferrer.run_until(resumes_at)
        assert row(ctx, a).status == "running"
    assert waits == [5, 10, 20, 40, 60, 60]
    assert len(heard.of("queue_hold")) == 6  # each lifted, so each is new


def test_a_stated_reset_is_honoured_plus_five_minutes_and_several_hits_announce_once(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=3, wired=True)
    heard = Heard(ctx)
    a, b = new(ctx), new(ctx)
    submit_turn(ctx, a, "a")
    submit_turn(ctx, b, "b")
    reset = clock.now() + timedelta(minutes=17)
    finish(ctx, workers, deferrer, a, Outcome.RATE_LIMITED, rate_limit_reset_at=reset)
    finish(ctx, workers, deferrer, b, Outcome.RATE_LIMITED)  # the same limit, met by a second turn
    hold = only_queue_hold(ctx)
    assert hold.resumes_at == reset + timedelta(minutes=5) and hold.attempt == 1
    assert len(heard.of("queue_hold")) == 1


def test_resume_runs_the_next_session_without_waiting_and_a_manual_start_ignores_the_wait(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=3, wired=True)
    a, b, c = new(ctx), new(ctx), new(ctx)
    submit_turn(ctx, a, "a")
    finish(ctx, workers, deferrer, a, Outcome.RATE_LIMITED)
    submit_turn(ctx, b, "b")
    submit_turn(ctx, c, "c")
    assert start_now(ctx, c).submission.outcome == "started"  # seed 002: a press skips the wait
    result = resume_queue(ctx, actor="U_OPS")
    assert result.sentence.startswith(
        "The queue is resumed (provider rate limit, held since 2026-11-02 09:00 UTC) by U_OPS"
    )
    deferrer.advance(timedelta(0))
    assert row(ctx, a).status == "running" and row(ctx, b).status == "running"
    with pytest.raises(Refused, match="nothing to resume: no queue hold is in force on the whole queue"):
        resume_queue(ctx, actor="U_OPS")


def test_an_auth_rejection_holds_without_a_time_and_a_verified_sign_in_lifts_it(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, wired=True)
    a = new(ctx, runtime="claude")
    submit_turn(ctx, a, "a")
    finish(ctx, workers, deferrer, a, Outcome.AUTH_REJECTED, error="401 invalid x-api-key")
    hold = only_queue_hold(ctx)
    sentence = (
        "The stored claude credential was rejected, so nothing new will start. Sign in again, then resume; "
        "the hold also lifts by itself as soon as a claude turn still running finishes having authenticated."
    )
    assert (hold.label, hold.sentence, hold.resumes_at, hold.resume_offered) == ("sign-in needed", sentence, None, True)
    text = holds_text(ctx)
    assert "  sign-in needed (whole queue) · 1 waiting · since 2026-11-02 09:00 UTC\n" in text
    assert f"      {sentence}\n      Resume: resume" in text
    s = row(ctx, a)
    assert s.status == "waiting" and s.hold_reason == "queue_hold" and s.consecutive_failures == 0
    assert s.hold_sentence == f"The queue is paused (sign-in needed): {sentence}"
    deferrer.advance(timedelta(hours=3))  # its ladder asks again and again; the hold keeps it
    assert row(ctx, a).status == "waiting"
    assert sign_in_verified(ctx) == 1
    deferrer.advance(timedelta(0))
    assert row(ctx, a).status == "running" and holds(ctx).queue_holds == []


def test_exhausted_credits_block_the_session_at_once(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, wired=True)
    heard = Heard(ctx)
    a, b = new(ctx, title="Nightly triage", runtime="claude"), new(ctx)
    submit_turn(ctx, a, "a")
    finish(ctx, workers, deferrer, a, Outcome.CREDITS_EXHAUSTED, error="credit balance is too low")
    hold = only_queue_hold(ctx)
    sentence = (
        "The claude API key has no credit or quota left, so every run would fail the same way. Top up the "
        f"provider account, then resume; #{a} “Nightly triage” is blocked and needs a start of its own as well."
    )
    assert (hold.label, hold.sentence, hold.resumes_at, hold.resume_offered) == (
        "API credits exhausted",
        sentence,
        None,
        True,
    )
    assert f"      {sentence}\n      Resume: resume" in holds_text(ctx)
    assert row(ctx, a).status == "blocked"
    assert heard.of("failed")[-1]["session_id"] == a
    assert submit_turn(ctx, b, "b").outcome == "held"
    result = resume_queue(ctx, actor="U_OPS")
    assert f"#{a} stays blocked until it is started again." in result.sentence
    deferrer.advance(timedelta(0))
    assert row(ctx, b).status == "running" and row(ctx, a).status == "blocked"


def test_six_consecutive_failures_pause_that_group_only(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=4, turn_minutes=1, wired=True)
    flaky = new(ctx, title="Flaky build", concurrency_group="repo:acme/api")
    workers.outcome = lambda r: Outcome.FAILED_RETRYABLE if r.session_id == flaky else Outcome.SUCCESS
    submit_turn(ctx, flaky, "build")
    deferrer.advance(timedelta(hours=2))  # five retries on the ladder (1, 2, 4, 8, 16 minutes), then the sixth
    assert row(ctx, flaky).status == "blocked" and row(ctx, flaky).consecutive_failures == 6
    assert len([r for r in workers.submitted if r.session_id == flaky]) == 6
    hold = only_queue_hold(ctx)
    sentence = (
        f"#{flaky} “Flaky build” failed 6 attempts in a row and is blocked; that pauses the whole "
        "repo:acme/api queue, not only that session. Resume to try again."
    )
    assert (hold.label, hold.group, hold.sentence, hold.resume_offered) == (
        "a session failed every retry",
        "repo:acme/api",
        sentence,
        True,
    )
    assert "  a session failed every retry (group repo:acme/api) · 0 waiting · since" in holds_text(ctx)
    assert "      Resume: resume repo:acme/api" in holds_text(ctx)

    same, other = new(ctx, concurrency_group="repo:acme/api"), new(ctx, concurrency_group="repo:acme/web")
    assert submit_turn(ctx, same, "s").outcome == "held"
    assert submit_turn(ctx, other, "o").outcome == "started"  # another group is not held
    with pytest.raises(Refused, match="held now: repo:acme/api — resume one of those by name"):
        resume_queue(ctx, actor="U_OPS")
    resume_queue(ctx, "repo:acme/api", actor="U_OPS")
    deferrer.advance(timedelta(0))
    assert row(ctx, same).status == "running"


def test_an_error_a_retry_cannot_fix_fails_the_session_and_holds_its_group(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, wired=True)
    a = new(ctx, title="Use the new model", concurrency_group="repo:acme/api")
    submit_turn(ctx, a, "a")
    finish(ctx, workers, deferrer, a, Outcome.FAILED, error="model not found: claude-x")
    hold = only_queue_hold(ctx)
    sentence = (
        f"#{a} “Use the new model” hit an error a retry cannot fix (model not found: claude-x) and has "
        "stopped; that pauses the repo:acme/api queue. Fix it on the session, then resume."
    )
    assert (hold.label, hold.sentence, hold.resume_offered) == (
        "a session hit an error a retry cannot fix",
        sentence,
        True,
    )
    assert row(ctx, a).status == "failed" and row(ctx, a).consecutive_failures == 0
    assert "stays failed until it is started again" in resume_queue(ctx, "repo:acme/api", actor="U_OPS").sentence


def test_every_candidate_waiting_on_a_prerequisite_is_a_hold_resume_cannot_lift(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=3, turn_minutes=30, wired=True)
    heard = Heard(ctx)
    base = new(ctx, title="Schema change")
    submit_turn(ctx, base, "migrate")
    waiters = [new(ctx, title=f"after {i}") for i in range(2)]
    with session_scope(engine) as db:
        for w in waiters:
            record_prerequisites(db, db.get(Session, w), f"depends on #{base}")
    for w in waiters:
        assert submit_turn(ctx, w, "go").reason == "prerequisite"
    run_periodic(ctx, "operator_hold_sweep")  # no queue pass was requested: the sweep reports the queue-level hold
    hold = only_queue_hold(ctx)
    sentence = f"Every queued session waits on a prerequisite: #{base} (running). The queue moves by itself once it is done, canceled or closed."
    assert (hold.label, hold.sentence, hold.resumes_at, hold.resume_offered) == (
        "waiting on a prerequisite",
        sentence,
        None,
        False,
    )
    assert f"      {sentence}\n      No Resume: it would re-apply at once; it lifts by itself." in holds_text(ctx)
    assert [n["hold"].reason for n in heard.of("queue_hold")] == ["prerequisite"]
    with pytest.raises(
        Refused, match=f"Resume cannot lift a prerequisite hold.*when #{base} is done, canceled or closed"
    ):
        resume_queue(ctx, actor="U_OPS")
    deferrer.advance(timedelta(minutes=30))  # the prerequisite finishes: the queue moves by itself
    assert [row(ctx, w).status for w in waiters] == ["running", "running"]
    assert holds(ctx).queue_holds == []


def test_a_change_of_reason_announces_again(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=3, turn_minutes=60, wired=True)
    heard = Heard(ctx)
    base, limited = new(ctx), new(ctx)
    submit_turn(ctx, base, "long job")
    submit_turn(ctx, limited, "x")
    waiter = new(ctx)
    with session_scope(engine) as db:
        record_prerequisites(db, db.get(Session, waiter), f"@#{base} first")
    finish(ctx, workers, deferrer, limited, Outcome.RATE_LIMITED)
    submit_turn(ctx, waiter, "after base")
    deferrer.advance(timedelta(minutes=5))  # the rate limit expires; `limited` runs, `waiter` waits on base
    assert row(ctx, limited).status == "running"
    assert [n["hold"].reason for n in heard.of("queue_hold")] == ["rate_limit", "prerequisite"]
    with session_scope(engine) as db:
        reasons = [(h.reason, h.released_at is not None) for h in db.exec(select(QueueHold).order_by(QueueHold.id))]
    assert reasons == [("rate_limit", True), ("prerequisite", False)]


def test_resume_against_a_provider_that_still_refuses_does_not_announce_the_hold_again(engine, clock) -> None:
    """Seed 002: a hold announces itself once, when new. A Resume the provider answers with the
    same refusal puts the same hold back (at once: the turn failed), not a new one to post."""
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=3, turn_minutes=30, wired=True)
    heard = Heard(ctx)
    a = new(ctx)
    submit_turn(ctx, a, "x")
    finish(ctx, workers, deferrer, a, Outcome.RATE_LIMITED)
    for _ in range(5):  # people press Resume while the provider still refuses
        resume_queue(ctx, actor="U_OPS")
        deferrer.advance(timedelta(0))
        assert row(ctx, a).status == "running"
        finish(ctx, workers, deferrer, a, Outcome.RATE_LIMITED)
        assert only_queue_hold(ctx).reason == "rate_limit"
    assert len(heard.of("queue_hold")) == 1
    # Once a turn has succeeded, the next refusal is a new hold and says so.
    resume_queue(ctx, actor="U_OPS")
    deferrer.advance(timedelta(0))
    finish(ctx, workers, deferrer, a, Outcome.SUCCESS)
    b = new(ctx)
    submit_turn(ctx, b, "y")
    finish(ctx, workers, deferrer, b, Outcome.RATE_LIMITED)
    assert len(heard.of("queue_hold")) == 2
