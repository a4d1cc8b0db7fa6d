"""A flaky agent does not stop the fleet (seed 002, "The holds"): six attempts are attempts over
time, the stated retry time holds against every queue pass, a failing session pauses only its
own queue, the sixth failure in a row to reach the provider is a task failure, and an auth hold
lifts by itself when a later turn authenticates."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlmodel import select

from integrations.runners.command import CommandRunner
from scheduler.engine.records import hold_job_id
from scheduler.engine.start_now import start_now
from scheduler.engine.turns import submit_turn
from scheduler.holds.queue import resume_queue
from scheduler.pauses.sleep import wake_me_up_later
from scheduler.ports import Outcome, TurnRequest, TurnResult
from scheduler.rules import failures
from scheduler.store.db import session_scope
from scheduler.store.models import QueueHold, Turn
from scheduler.testing import VirtualDeferrer
from tests.support.harness import build, new, row
from tests.support.holdkit import Heard, finish, holds

T = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("outcome", "before", "action", "queue_hold", "scope", "after"),
    [
        (Outcome.SUCCESS, 4, failures.SETTLE, None, None, 0),
        (Outcome.HALTED, 2, failures.WAIT, None, None, 2),
        # Rate limit: back to the queue with no retry spent; the provider account holds everyone.
        (Outcome.RATE_LIMITED, 2, failures.REQUEUE, "rate_limit", failures.PROVIDER, 2),
        # Auth: back to the queue; the whole queue waits for a credential that works.
        (Outcome.AUTH_REJECTED, 0, failures.REQUEUE, "auth", failures.PROVIDER, 0),
        # Credits: the task is blocked at once; every run would fail the same way.
        (Outcome.CREDITS_EXHAUSTED, 0, failures.BLOCK, "credits", failures.PROVIDER, 0),
        (Outcome.MODEL_ACCESS, 1, failures.REQUEUE, "model_access", failures.PROVIDER, 1),
        # Task failed: an error a retry cannot fix, on the first failure.
        (Outcome.FAILED, 0, failures.FAIL, "task_failed", failures.OWN_QUEUE, 0),
        # Retry exhausted: six consecutive attempts failed.
        (Outcome.FAILED_RETRYABLE, 0, failures.RETRY, None, None, 1),
        (Outcome.FAILED_RETRYABLE, 4, failures.RETRY, None, None, 5),
        (Outcome.FAILED_RETRYABLE, 5, failures.BLOCK, "retry_exhausted", failures.OWN_QUEUE, 6),
        # Task failed: also the sixth consecutive failure to reach the provider at all.
        (Outcome.UNREACHABLE, 4, failures.RETRY, None, None, 5),
        (Outcome.UNREACHABLE, 5, failures.BLOCK, "task_failed", failures.OWN_QUEUE, 6),
    ],
)
def test_the_failure_policy_follows_seed_002s_table(
    outcome: Outcome, before: int, action: str, queue_hold: str | None, scope: str | None, after: int
) -> None:
    step = failures.next_step(outcome, before, T)
    assert (step.action, step.queue_hold, step.scope, step.failures) == (action, queue_hold, scope, after)
    assert (step.retry_at is not None) == (action == failures.RETRY)


def test_six_attempts_span_at_least_thirty_minutes() -> None:
    waits = [failures.retry_delay(n) for n in range(1, failures.RETRY_LIMIT)]
    assert waits == [timedelta(minutes=m) for m in (1, 2, 4, 8, 16)]
    assert sum(waits, timedelta()) >= timedelta(minutes=30)


AGENT = """
import json, pathlib, sys
counter = pathlib.Path(sys.argv[1])
calls = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(calls))
if calls <= 5:
    print("API Error: Connection error. (read ECONNRESET: connection reset by peer)", file=sys.stderr)
    sys.exit(1)
print(json.dumps({"type": "result", "is_error": False, "result": "fixed it", "total_cost_usd": 0.02, "session_id": "flaky-1"}))
"""


class RunnerInVirtualTime:
    """The worker-pool port over a real CommandRunner: each turn's agent process really runs (so
    its exit code and words are classified as in production), and its result is reported after
    `minutes` of virtual time."""

    def __init__(
        self, runner: CommandRunner, deferrer: VirtualDeferrer, minutes: float, fallback: Callable[..., None]
    ) -> None:
        self.runner, self.deferrer, self.minutes, self.fallback = runner, deferrer, minutes, fallback

    def submit(self, request: TurnRequest, on_done: Callable[[TurnResult], None]) -> None:
        if request.runtime != "flaky":
            self.fallback(request, on_done)
            return
        result = self.runner.run(request)
        self.deferrer.schedule(
            f"turn-end:{request.turn_id}", self.deferrer.clock.now() + timedelta(minutes=self.minutes), on_done, result
        )

    def halt(self, turn_id: int) -> bool:
        return False


def test_an_agent_that_cannot_connect_five_times_retries_on_the_backoff_and_succeeds(
    engine, clock, tmp_path: Path
) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=4, turn_minutes=1, wired=True)
    heard = Heard(ctx)
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(AGENT))
    runner = CommandRunner(
        f"{sys.executable} {script} {tmp_path / 'calls'} {{prompt}}", "", "flaky", 60, tmp_path / "work"
    )
    ctx.ports.workers = RunnerInVirtualTime(runner, deferrer, 1, workers.submit)
    flaky = new(ctx, title="Flaky", runtime="flaky", concurrency_group="repo:acme/api")
    t0 = clock.now()
    assert submit_turn(ctx, flaky, "fix the build").outcome == "started"

    # Other work keeps arriving and finishing every minute: every turn's end asks for a queue pass,
    # and none of those passes may start the flaky session before its retry time.
    started_meanwhile = []
    for minute in range(1, 40):
        deferrer.run_until(t0 + timedelta(minutes=minute, seconds=30))
        if minute in (2, 10, 20):
            urgent = new(ctx, scheduling_class="priority")
            elsewhere = new(ctx, concurrency_group="repo:acme/web")
            loose = new(ctx)
            started_meanwhile += [submit_turn(ctx, s, "other work").outcome for s in (urgent, elsewhere, loose)]
    assert started_meanwhile == ["started"] * 9  # priority work and other repositories start at once

    with session_scope(engine) as db:
        turns = list(db.exec(select(Turn).where(Turn.session_id == flaky).order_by(Turn.id)))
    assert [t.outcome for t in turns] == ["unreachable"] * 5 + ["success"]
    gaps = [turns[i + 1].started_at - turns[i].finished_at for i in range(5)]  # type: ignore[operator]
    assert gaps == [timedelta(minutes=m) for m in (1, 2, 4, 8, 16)], gaps
    assert turns[-1].started_at - turns[0].started_at >= timedelta(minutes=30)
    assert row(ctx, flaky).status == "done" and row(ctx, flaky).consecutive_failures == 0
    assert holds(ctx).queue_holds == [] and heard.of("queue_hold") == []
    assert (tmp_path / "calls").read_text() == "6"


@pytest.mark.parametrize("group", ["repo:acme/api", None])
def test_the_sixth_failure_to_reach_the_provider_is_a_task_failure_of_its_own_queue(
    engine, clock, group: str | None
) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=4, turn_minutes=1, wired=True)
    heard = Heard(ctx)
    flaky = new(ctx, title="Flaky", concurrency_group=group)
    workers.outcome = lambda r: Outcome.UNREACHABLE if r.session_id == flaky else Outcome.SUCCESS
    submit_turn(ctx, flaky, "fix the build")
    deferrer.advance(timedelta(hours=1))
    assert row(ctx, flaky).status == "blocked" and row(ctx, flaky).consecutive_failures == 6
    assert heard.of("failed")[-1]["session_id"] == flaky
    with session_scope(engine) as db:
        recorded = [(h.group, h.reason) for h in db.exec(select(QueueHold))]
    if group is None:
        assert recorded == []  # nothing else waits on a session in no queue
    else:
        assert recorded == [(group, "task_failed")]
        hold = holds(ctx).queue_holds[0]
        assert hold.sentence == (
            f"#{flaky} “Flaky” could not reach the provider in 6 attempts in a row and is blocked; that pauses "
            f"the {group} queue. Check this machine's network, or wait for the provider to recover, then resume."
        )
        assert submit_turn(ctx, new(ctx, concurrency_group=group), "same tree").outcome == "held"
    unrelated = [new(ctx, scheduling_class="priority"), new(ctx), new(ctx, concurrency_group="repo:acme/web")]
    assert [submit_turn(ctx, s, "other work").outcome for s in unrelated] == ["started"] * 3


def test_an_auth_hold_lifts_when_a_later_turn_authenticates(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=3, turn_minutes=30, wired=True)
    heard = Heard(ctx)
    long_turn, rejected, waiting = new(ctx, runtime="claude"), new(ctx, runtime="claude"), new(ctx, runtime="claude")
    submit_turn(ctx, long_turn, "long")
    submit_turn(ctx, rejected, "r")
    finish(ctx, workers, deferrer, rejected, Outcome.AUTH_REJECTED, error="401 invalid x-api-key")
    assert [h.reason for h in holds(ctx).queue_holds] == ["auth"]
    assert submit_turn(ctx, waiting, "w").outcome == "held"
    finish(ctx, workers, deferrer, long_turn, Outcome.SUCCESS)  # it reached the provider: the credential works
    assert holds(ctx).queue_holds == []
    lifted = heard.of("queue_hold_lifted")
    assert [n["by"] for n in lifted] == ["a claude turn that authenticated"]
    assert row(ctx, rejected).status == "running" and row(ctx, waiting).status == "running"


def test_a_stopped_session_started_again_gets_six_fresh_attempts(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=4, turn_minutes=1, wired=True)
    flaky = new(ctx, title="Flaky", concurrency_group="repo:acme/api")
    workers.outcome = lambda r: Outcome.FAILED_RETRYABLE if r.session_id == flaky else Outcome.SUCCESS
    submit_turn(ctx, flaky, "fix the build")
    deferrer.advance(timedelta(hours=1))
    assert row(ctx, flaky).status == "blocked" and row(ctx, flaky).consecutive_failures == 6
    resume_queue(ctx, "repo:acme/api", actor="U_OPS")  # "Resume to try again", then start it
    assert start_now(ctx, flaky, actor="U_OPS").submission is not None
    finish(ctx, workers, deferrer, flaky, Outcome.FAILED_RETRYABLE, error="connection reset")
    s = row(ctx, flaky)
    assert (s.status, s.hold_reason, s.consecutive_failures) == (
        "waiting",
        "failed_retryable",
        1,
    )  # a retry, not blocked again


def test_a_wake_does_not_lift_the_retry_floor(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=4, turn_minutes=1, wired=True)
    sid = new(ctx)
    workers.outcome = lambda r: Outcome.FAILED_RETRYABLE
    submit_turn(ctx, sid, "x")
    while row(ctx, sid).consecutive_failures < 5:  # the next retry waits 16 minutes
        deferrer.advance(timedelta(seconds=30))
    retry_at = row(ctx, sid).hold_retry_at
    workers.outcome = lambda r: Outcome.SUCCESS
    wake_me_up_later(ctx, sid, clock.now() + timedelta(minutes=1))
    deferrer.advance(timedelta(minutes=1, seconds=1))
    assert row(ctx, sid).status == "waiting" and deferrer.next_run(hold_job_id(sid)) == retry_at
    deferrer.run_until(retry_at)
    assert row(ctx, sid).status == "running"
