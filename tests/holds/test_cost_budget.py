"""Seed 002, "The holds", row "Cost budget": this deployment's estimated spend on the picked
session's runtime reached the budget set for it, so the session is not started and the queue
holds, naming the provider and the amount spent and saying to reset the spend. No Resume;
resetting the spend or changing the budget re-kicks the queue."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from scheduler.engine.start_now import start_now
from scheduler.engine.turns import submit_turn
from scheduler.errors import InvalidInput, Refused
from scheduler.holds.budgets import reset_spend
from scheduler.holds.queue import resume_queue
from scheduler.store.db import session_scope
from scheduler.store.models import Policy, PolicyAudit
from scheduler.store.policy import set_policy
from scheduler.wiring import run_periodic
from tests.support.harness import build, new, row
from tests.support.holdkit import Heard, holds, holds_text

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SENTENCE = ("The echo spend has reached this deployment's $1.50 budget: $2.00 spent so far. Reset the spend to resume "
            "(policy reset-spend echo); sessions of other runtimes keep running.")


def _spent_two_dollars(any_engine, clock):
    """A deployment whose echo runtime has a $1.50 budget and has spent $2.00 (one 20-minute turn)."""
    ctx, deferrer, workers, quota = build(any_engine, clock, max_sessions=3, turn_minutes=20, burn=0.1, wired=True)
    heard = Heard(ctx)
    set_policy(ctx, {}, merge={"cost_budgets": {"echo": "$1.50"}}, surface="test", actor="U_OPS")
    first = new(ctx, title="first")
    assert submit_turn(ctx, first, "go").outcome == "started"
    deferrer.advance(timedelta(minutes=20))
    assert row(ctx, first).status == "done"
    return ctx, deferrer, workers, heard


def test_seed_002_cost_budget_holds_the_picked_session_and_names_provider_and_spend(any_engine, clock) -> None:
    ctx, deferrer, _workers, heard = _spent_two_dollars(any_engine, clock)
    run_periodic(ctx, "operator_hold_sweep")
    assert holds(ctx).queue_holds == []  # over budget, but no session waits on it: nothing is held
    picked = new(ctx, title="second")
    sub = submit_turn(ctx, picked, "go")
    assert (sub.outcome, sub.reason) == ("held", "cost_budget")
    assert (
        sub.sentence
        == "Held: echo has spent $2.00, reaching this deployment's $1.50 budget for it. Reset its spend, or change the budget, to resume."
    )
    other = new(ctx, title="elsewhere", runtime="claude")
    assert submit_turn(ctx, other, "go").outcome == "started"  # spends nothing of echo's budget
    run_periodic(ctx, "operator_hold_sweep")  # no queue pass was requested: the sweep reports the hold

    [hold] = holds(ctx).queue_holds
    assert (hold.label, hold.group, hold.sentence, hold.resumes_at, hold.resume_offered) == (
        "cost budget",
        None,
        SENTENCE,
        None,
        False,
    )
    assert hold.detail["runtimes"] == {"echo": {"spent": 2.0, "budget": 1.5}}
    text = holds_text(ctx)
    assert "  cost budget (whole queue) · 1 waiting · since 2026-11-02 09:20 UTC\n" in text
    assert (
        f"      {SENTENCE}\n      No Resume: it would re-apply at once; resetting the spend or changing the budget "
        f"moves the queue."
        in text
    )
    assert [n["hold"].reason for n in heard.of("queue_hold")] == ["cost_budget"]
    with pytest.raises(
        Refused, match=r"Resume cannot lift the cost-budget hold: it would re-apply at once. Reset the spend of echo"
    ):
        resume_queue(ctx, actor="U_OPS")
    deferrer.advance(timedelta(hours=1))  # its re-checks keep it held
    assert row(ctx, picked).status == "waiting" and len(holds(ctx).queue_holds) == 1

    audit = reset_spend(ctx, "echo", surface="test", actor="U_OPS")
    assert audit.line.startswith("[FleetPolicy] changed via test by U_OPS: spend_reset_at")
    deferrer.advance(timedelta(0))
    assert row(ctx, picked).status == "running"
    assert holds(ctx).queue_holds == []
    assert heard.of("queue_hold_lifted")[-1]["by"] == "the spend was reset or the budget changed"


def test_a_changed_budget_re_kicks_the_queue(any_engine, clock) -> None:
    ctx, deferrer, _workers, _heard = _spent_two_dollars(any_engine, clock)
    picked = new(ctx)
    assert submit_turn(ctx, picked, "go").reason == "cost_budget"
    set_policy(ctx, {}, merge={"cost_budgets": {"echo": 5}}, surface="test", actor="U_OPS")
    deferrer.advance(timedelta(0))
    assert row(ctx, picked).status == "running"


def test_removing_the_budget_lifts_it_and_a_person_pressing_start_is_not_gated(any_engine, clock) -> None:
    ctx, deferrer, _workers, _heard = _spent_two_dollars(any_engine, clock)
    pressed, queued = new(ctx), new(ctx)
    assert submit_turn(ctx, queued, "go").reason == "cost_budget"
    assert start_now(ctx, pressed).submission.outcome == "started"
    set_policy(ctx, {}, merge={"cost_budgets": {"echo": None}}, surface="test", actor="U_OPS")
    deferrer.advance(timedelta(0))
    assert row(ctx, queued).status == "running"


@pytest.mark.parametrize(
    ("budgets", "message"),
    [
        (
            {"echo": -5},
            "budget:echo: -5 is not a cost budget; give US dollars above 0 (e.g. 50 or 12.50), or none to remove it",
        ),
        ({"echo": "lots"}, "budget:echo: 'lots' is not a cost budget; give US dollars above 0"),
        ({"echo": 0}, "budget:echo: 0 is not a cost budget"),
        ({"echo": float("nan")}, "budget:echo: nan is not a cost budget"),
        ({"gpt-9": 10}, "runtime: 'gpt-9' is not a runtime of this deployment; use one of echo"),
    ],
)
def test_a_bad_budget_says_what_is_allowed_and_changes_nothing(engine, clock, budgets, message) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, wired=True)
    set_policy(ctx, {}, merge={"cost_budgets": {"echo": 3}}, surface="test", actor="U_OPS")
    with session_scope(engine) as db:
        audits = len(db.exec(select(PolicyAudit)).all())
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        set_policy(ctx, {"max_sessions": 4}, merge={"cost_budgets": budgets}, surface="test", actor="U_OPS")
    with session_scope(engine) as db:
        policy = db.get(Policy, 1)
        assert policy is not None and policy.cost_budgets == {"echo": 3.0} and policy.max_sessions == 2
        assert len(db.exec(select(PolicyAudit)).all()) == audits


def test_resetting_the_spend_of_an_unknown_runtime_is_refused(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, wired=True)
    with pytest.raises(InvalidInput, match="runtime: 'gpt-9' is not a runtime of this deployment; use one of echo"):
        reset_spend(ctx, "gpt-9", surface="test", actor="U_OPS")
    with session_scope(engine) as db:
        policy = db.get(Policy, 1)
        assert policy is not None and policy.spend_reset_at == {}
