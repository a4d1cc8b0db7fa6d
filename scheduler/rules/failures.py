"""What a finished turn's outcome does next (seed 002, "The holds"): a pure function of the
outcome and the session's consecutive failures before it.

    outcome            next                               queue hold        scope
    success            settle (done, or the next queued)  —                 —
    halted             waiting: the pause owns the resume —                 —
    rate_limited       back to the queue, no retry spent  rate_limit        the provider account
    auth_rejected      back to the queue, no retry spent  auth              the provider account
    credits_exhausted  blocked                            credits           the provider account
    model_access       back to the queue, no retry spent  model_access      the provider account
    failed             failed at once                     task_failed       the session's own queue
    failed_retryable   retried on a backoff; the sixth    retry_exhausted   the session's own queue
                       in a row is blocked
    unreachable        retried on a backoff; the sixth    task_failed       the session's own queue
                       in a row is blocked

Rate limits, auth, credits and the plan's models belong to the provider account every run shares, so they hold the
whole queue. A failed session holds only its own queue — its concurrency group, the working tree
it may have left half-done (seed 002's one queue per project) — and nothing when it has none:
one flaky session never stops unrelated work.

Six attempts are attempts over time: the retries wait 1, 2, 4, 8 and 16 minutes, so six of them
span 31 minutes, and a provider outage of a few seconds costs one retry, not the session.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.ports import Outcome

RETRY_LIMIT = 6  # consecutive failures that end the retries
RETRY_FIRST = timedelta(minutes=1)
RETRY_CEILING = timedelta(minutes=30)
RETRYABLE = frozenset({Outcome.FAILED_RETRYABLE, Outcome.UNREACHABLE})
# The hold reasons a retry waits under: its time is a floor that only its own alarm lifts.
RETRY_HOLD_REASONS = frozenset(o.value for o in RETRYABLE)

SETTLE, WAIT, RETRY, REQUEUE, BLOCK, FAIL = "settle", "wait", "retry", "requeue", "block", "fail"
PROVIDER, OWN_QUEUE = "provider", "own_queue"


@dataclass(frozen=True)
class NextStep:
    failures: int  # consecutive failures once this outcome is counted
    action: str  # settle | wait | retry | requeue | block | fail
    queue_hold: str | None = None  # the queue hold reason this outcome places, if any
    scope: str | None = None  # provider (the whole queue) | own_queue (the session's group)
    retry_at: datetime | None = None  # when a retry is asked again


def retry_delay(failures: int) -> timedelta:
    """The wait after the `failures`-th consecutive failure: 1m, 2m, 4m, 8m, 16m, capped."""
    delay: timedelta = RETRY_FIRST * (2 ** min(max(failures - 1, 0), 16))
    return min(delay, RETRY_CEILING)


def next_step(outcome: Outcome, failures: int, now: datetime) -> NextStep:
    """The next state for a session whose turn ended with `outcome`, after `failures`
    consecutive failures before this one."""
    if outcome is Outcome.SUCCESS:
        return NextStep(0, SETTLE)
    if outcome is Outcome.HALTED:
        return NextStep(failures, WAIT)
    if outcome is Outcome.RATE_LIMITED:
        return NextStep(failures, REQUEUE, "rate_limit", PROVIDER)
    if outcome is Outcome.AUTH_REJECTED:
        return NextStep(failures, REQUEUE, "auth", PROVIDER)
    if outcome is Outcome.CREDITS_EXHAUSTED:
        return NextStep(failures, BLOCK, "credits", PROVIDER)
    if outcome is Outcome.MODEL_ACCESS:
        return NextStep(failures, REQUEUE, "model_access", PROVIDER)
    if outcome in RETRYABLE:
        count = failures + 1
        if count < RETRY_LIMIT:
            return NextStep(count, RETRY, retry_at=now + retry_delay(count))
        reason = "task_failed" if outcome is Outcome.UNREACHABLE else "retry_exhausted"
        return NextStep(count, BLOCK, reason, OWN_QUEUE)
    return NextStep(failures, FAIL, "task_failed", OWN_QUEUE)
