"""Seed 002's model-access, blocked-interference and cost-budget holds reach the GitHub status
comment as every hold does: the held session's own sentence is the comment's "why"."""

from __future__ import annotations

from datetime import timedelta

import pytest

from integrations.github.status import render_body, status_view
from scheduler.engine.turns import submit_turn
from scheduler.holds.queue import resume_queue
from scheduler.ports import Outcome
from scheduler.rules.genesis import SchedulingClass
from scheduler.store.policy import set_policy
from tests.support.harness import build, new, row
from tests.support.holdkit import finish

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _comment(ctx, session_id: int) -> str:
    view = status_view(row(ctx, session_id), SchedulingClass.PRIORITY, ctx.clock.now())
    assert view.state == "held"
    return render_body(view)


def test_the_status_comment_says_model_access(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, wired=True)
    a = new(ctx, title="t", runtime="claude")
    submit_turn(ctx, a, "go")
    finish(ctx, workers, deferrer, a, Outcome.MODEL_ACCESS, extra={"model": "opus"})
    assert (
        "The queue is paused (no access to the chosen model): The claude plan does not include the model opus"
        in _comment(ctx, a)
    )


def test_the_status_comment_says_blocked_interference(engine, clock) -> None:
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=3, wired=True)
    blocked = new(ctx, title="Fix login", prompt="src/auth/login.py", concurrency_group="repo:o/r")
    submit_turn(ctx, blocked, "src/auth/login.py")
    finish(ctx, workers, deferrer, blocked, Outcome.FAILED, error="bad request")
    resume_queue(ctx, "repo:o/r", actor="U_OPS")
    a = new(ctx, title="Login errors", prompt="src/auth/login.py", concurrency_group="repo:o/r")
    submit_turn(ctx, a, "src/auth/login.py")
    assert f"Skipped: it overlaps #{blocked} “Fix login”, failed in the repo:o/r queue" in _comment(ctx, a)


def test_the_status_comment_says_cost_budget(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=3, wired=True)
    set_policy(ctx, {}, merge={"cost_budgets": {"echo": 1}}, surface="test", actor="U_OPS")
    first = new(ctx)
    submit_turn(ctx, first, "go")
    deferrer.advance(timedelta(minutes=20))
    a = new(ctx)
    submit_turn(ctx, a, "go")
    assert "Held: echo has spent $2.00, reaching this deployment's $1.00 budget for it." in _comment(ctx, a)
