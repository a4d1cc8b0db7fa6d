"""Seed 002, "The holds", row "Cost budget", on every surface that sets policy: a budget per
runtime and a spend reset through `PATCH /api/v1/policy` and `POST /api/v1/policy/reset-spend`,
`/pacer policy set budget:<runtime>=…` and `/pacer policy reset-spend <runtime>`, and
`pacer policy --set` / `--reset-spend`; each audited, and bad input refused with a specific
error that changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlmodel import select

from bot.chat import answers
from bot.commands import USAGE
from bot.config.settings import load
from bot.runtime.process import Pacer
from scheduler.engine.turns import submit_turn
from scheduler.store.db import session_scope
from scheduler.store.models import Policy, PolicyAudit
from scheduler.wiring import run_periodic
from tests.support import harness
from tests.support.harness import new, row
from tests.support.paths import ROOT

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.api(max_sessions=2, turn_minutes=20),
]


def _state(engine) -> tuple[dict[str, float], dict[str, str], int]:
    with session_scope(engine) as db:
        policy = db.get(Policy, 1)
        assert policy is not None
        return dict(policy.cost_budgets), dict(policy.spend_reset_at), len(db.exec(select(PolicyAudit)).all())


def test_the_api_sets_a_budget_shows_the_spend_and_resets_it(api) -> None:
    r = api.patch("/policy", {"cost_budgets": {"echo": 1.5}}, actor="alice")
    assert r.status_code == 200, r.text
    assert r.json()["audit"] == "[FleetPolicy] changed via api by alice: cost_budgets {} -> {'echo': 1.5}"
    first = api.post("/sessions", {"prompt": "one"}).json()["session"]["id"]
    api.deferrer.advance(timedelta(minutes=20))  # 20 minutes at $0.10 a minute
    second = api.post("/sessions", {"prompt": "two"}).json()
    assert second["submission"]["reason"] == "cost_budget"
    run_periodic(api.ctx, "operator_hold_sweep")  # no queue pass was requested: the sweep reports the hold
    policy = api.get("/policy").json()["policy"]
    assert policy["cost_budgets"] == {"echo": 1.5}
    assert policy["spend"] == [{"runtime": "echo", "spent": 2.0, "budget": 1.5, "since": None, "over": True}]
    [hold] = api.get("/holds").json()["queue_holds"]
    assert (hold["reason"], hold["label"], hold["resume_offered"]) == ("cost_budget", "cost budget", False)
    assert "The echo spend has reached this deployment's $1.50 budget: $2.00 spent so far." in hold["sentence"]
    refused = api.post("/queue/resume", {})
    assert refused.status_code == 409 and "Resume cannot lift the cost-budget hold" in refused.json()["message"], (
        refused.text
    )

    reset = api.post("/policy/reset-spend", {"runtime": "echo"}, actor="alice")
    assert reset.status_code == 200, reset.text
    assert reset.json()["audit"].startswith(
        "[FleetPolicy] changed via api by alice: spend_reset_at {} -> {'echo': '2026-11-02T09:20:00+00:00'}"
    )
    api.settle()
    assert api.get(f"/sessions/{second['session']['id']}").json()["status"] == "running"
    assert api.get("/holds").json()["queue_holds"] == [] and first


@pytest.mark.parametrize(
    ("method", "path", "body", "field", "says"),
    [
        ("PATCH", "/policy", {"cost_budgets": {"echo": -5}}, "cost_budgets.echo", "greater than 0"),
        (
            "PATCH",
            "/policy",
            {"cost_budgets": {"gpt-9": 10}},
            "cost_budgets",
            "runtime: 'gpt-9' is not a runtime of this deployment; use one of echo",
        ),
        (
            "POST",
            "/policy/reset-spend",
            {"runtime": "gpt-9"},
            "runtime",
            "runtime: 'gpt-9' is not a runtime of this deployment",
        ),
    ],
)
def test_bad_budget_input_over_the_api_is_422_and_changes_nothing(api, method, path, body, field, says) -> None:
    before = _state(api.ctx.engine)
    r = api.patch(path, body) if method == "PATCH" else api.post(path, body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and says in r.json()["message"], r.json()
    assert _state(api.ctx.engine) == before


@pytest.fixture
def pacer(engine, clock) -> Pacer:
    ctx, deferrer, _workers, _quota = harness.build(engine, clock, max_sessions=2)
    settings = load({"PACER_ROSTER": "UOP=operator,UMEM=member"}, toml_path=None)
    return Pacer(settings=settings, engine=engine, clock=clock, deferrer=deferrer, ctx=ctx)


def test_pacer_policy_set_budget_and_reset_spend_in_chat(pacer) -> None:
    reply = answers.answer(pacer, "UOP", "policy set budget:echo=$1.50", surface="console")
    assert reply.ok, reply.text
    assert reply.text.startswith("Policy changed: cost_budgets none → echo=1.5.")
    assert "cost budgets: echo $0.00 spent of $1.50" in answers.answer(pacer, "UMEM", "policy", surface="console").text
    reset = answers.answer(pacer, "UOP", "policy reset-spend echo", surface="console")
    assert (
        reset.ok
        and "Recorded: [FleetPolicy] changed via console by UOP: spend_reset_at {} -> {'echo': '2026-11-02T09:00:00+00:00'}"
        in reset.text
    )
    assert (
        "cost budgets: echo $0.00 spent of $1.50 since 2026-11-02 09:00 UTC"
        in answers.answer(pacer, "UMEM", "policy", surface="console").text
    )
    removed = answers.answer(pacer, "UOP", "policy set budget:echo=none", surface="console")
    assert removed.text.startswith("Policy changed: cost_budgets echo=1.5 → none.")


@pytest.mark.parametrize(
    ("text", "actor", "message"),
    [
        (
            "policy set budget:echo=-1",
            "UOP",
            "budget:echo: '-1' is not a cost budget; give US dollars above 0 (e.g. 50 or 12.50), or none to remove it",
        ),
        ("policy set budget:echo=lots", "UOP", "budget:echo: 'lots' is not a cost budget"),
        ("policy set budget:gpt-9=10", "UOP", "runtime: 'gpt-9' is not a runtime of this deployment; use one of echo"),
        ("policy reset-spend gpt-9", "UOP", "runtime: 'gpt-9' is not a runtime of this deployment; use one of echo"),
        ("policy reset-spend", "UOP", "missing <runtime>"),
        ("policy reset-spend echo", "UMEM", "`policy set` needs the operator role; you are a member"),
    ],
)
def test_bad_budget_input_in_chat_says_what_is_allowed_and_changes_nothing(pacer, text, actor, message) -> None:
    before = _state(pacer.engine)
    reply = answers.answer(pacer, actor, text, surface="console")
    assert not reply.ok
    assert reply.text.splitlines()[0].startswith(f"error: {message}"), reply.text
    assert reply.text.splitlines()[-1] == f"usage: {USAGE['policy']}"
    assert _state(pacer.engine) == before


@pytest.mark.long
def test_pacer_policy_cli_sets_a_budget_and_resets_the_spend(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = lambda *a: subprocess.run([sys.executable, "-m", "bot.cli", "policy", *a], cwd=tmp_path, env=env,  # noqa: E731
                                    capture_output=True, text=True, timeout=60)
    bad = run("--set", "budget:echo=-3")
    assert bad.returncode == 2 and "budget:echo: '-3' is not a cost budget" in bad.stdout
    ok = run("--set", "budget:echo=25")
    assert ok.returncode == 0, ok.stderr
    assert (
        "[FleetPolicy] changed via cli:pacer policy" in ok.stdout and "cost_budgets {} -> {'echo': 25.0}" in ok.stdout
    )
    reset = run("--reset-spend", "echo")
    assert reset.returncode == 0, reset.stderr
    assert "spend_reset_at {} -> {'echo':" in reset.stdout
    unknown = run("--reset-spend", "gpt-9")
    assert unknown.returncode == 2 and "runtime: 'gpt-9' is not a runtime of this deployment" in unknown.stdout


def test_a_session_of_a_runtime_over_budget_is_held_through_the_chat_surface_too(pacer) -> None:
    answers.answer(pacer, "UOP", "policy set budget:echo=0.01", surface="console")
    ctx = pacer.ctx
    from scheduler.wiring import install

    install(ctx)
    first = new(ctx)
    submit_turn(ctx, first, "go")
    pacer.deferrer.advance(timedelta(minutes=20))
    second = new(ctx)
    assert submit_turn(ctx, second, "go").reason == "cost_budget"
    assert row(ctx, second).status == "waiting"
