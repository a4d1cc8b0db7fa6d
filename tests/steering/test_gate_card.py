"""The gate card: one builder behind `pacer policy`, the API and the App Home."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from scheduler.engine.turns import submit_turn
from scheduler.steering.gate_card import build_card, render_card
from scheduler.store.db import session_scope
from tests.support.harness import build, new
from tests.support.paths import ROOT


def test_card_reports_the_decision_the_gate_makes(engine, clock) -> None:
    ctx, deferrer, workers, quota = build(engine, clock, max_sessions=2)
    quota.spend_out()
    submit_turn(ctx, new(ctx), "held one")
    with session_scope(engine) as db:
        card = build_card(db, ctx, quota.read(clock.now()), clock.now())
    data = card.as_dict()
    assert data["decision"]["reason"] == "at_utilization_limit" and data["decision"]["ceiling"] == "spot_budget"
    assert data["decision"]["stops_running_work"] is True
    assert data["queue"]["held"] == 1
    text = render_card(card)
    assert "Decision for a new spot session: held by the spot budget" in text
    assert "Held until the 5-hour window rolls over" in text
    assert "1 held" in text


def test_card_says_when_the_configured_max_is_unreachable(engine, clock) -> None:
    ctx, *_ = build(engine, clock, max_sessions=20)
    ctx.limits.agent_workers = 12
    with session_scope(engine) as db:
        card = build_card(db, ctx, None, clock.now())
    assert "max sessions 20 is above the 12 workers, so 12 is the effective ceiling" in render_card(card)
    assert "No quota reading: the gate falls open." in render_card(card)


def test_pacer_policy_cli_sets_and_shows(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = lambda *a: subprocess.run([sys.executable, "-m", "bot.cli", "policy", *a], cwd=tmp_path, env=env,  # noqa: E731
                                    capture_output=True, text=True, timeout=60)
    bad = run("--set", "max_sessions=0")
    assert bad.returncode == 2 and "max_sessions: '0' must be between 1 and 10,000" in bad.stdout
    assert "usage: policy [set gating=on|off" in bad.stdout
    ok = run("--set", "max_sessions=8", "--set", "reserve_5h=30")
    assert ok.returncode == 0, ok.stderr
    assert "[FleetPolicy] changed via cli:pacer policy" in ok.stdout and "max_sessions 10 -> 8" in ok.stdout
    assert "reserve_5h_pct 20 -> 30" in ok.stdout
    assert "$15.00 reserved for priority" in ok.stdout


def test_pacer_policy_cli_takes_the_keys_and_overrides_of_pacer_policy_set(tmp_path: Path) -> None:
    """The CLI speaks `/pacer policy set`'s grammar (its `--help` keys, genesis overrides), and
    its change asks the leader for a queue pass through the shared job store."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = lambda *a: subprocess.run([sys.executable, "-m", "bot.cli", "policy", *a], cwd=tmp_path, env=env,  # noqa: E731
                                    capture_output=True, text=True, timeout=60)
    ok = run("--set", "gating=off", "--set", "override:command=spot")
    assert ok.returncode == 0, ok.stderr
    assert "gating_enabled on -> off" in ok.stdout and "genesis_class_overrides {} -> {'command': 'spot'}" in ok.stdout
    with sqlite3.connect(tmp_path / "var" / "pacer.db") as conn:
        assert [row[0] for row in conn.execute("SELECT id FROM apscheduler_jobs")] == ["queue_pass"]
    unknown = run("--set", "gating_enabled=on")
    assert unknown.returncode == 2
    assert "key: 'gating_enabled' is not a policy key; use gating, preemption" in unknown.stdout
    spaced = run("--set", "max_sessions = 8")
    assert spaced.returncode == 2 and "give one key=value without spaces to each --set" in spaced.stdout


def test_the_pool_answer_takes_each_of_the_seeds_three_states(engine, clock) -> None:
    """A reading of windows alone (the ledger) is one account: not blocked while both windows
    have room, a countdown to the later of the resets it waits on once they are spent, and no
    reading at all says that nothing here knows when work resumes."""
    ctx, _deferrer, _workers, quota = build(engine, clock)

    def card_for(reading):  # type: ignore[no-untyped-def]
        with session_scope(engine) as db:
            return build_card(db, ctx, reading, clock.now())

    free = card_for(quota.read(clock.now()))
    assert (free.pool_state, free.pool_sentence) == (
        "not_blocked",
        "Work is not blocked: 1 of 1 account has room on both windows now.",
    )
    quota.spend_out()
    quota.spent_7d = quota.capacity_7d
    out = card_for(quota.read(clock.now()))
    assert out.pool_state == "countdown"
    assert out.pool_sentence == "Work resumes in 5d 0h (2026-11-07 09:00 UTC): 1 account is out of capacity."
    unknown = card_for(None)
    assert unknown.pool_sentence == "Nothing here says when work resumes: no account has a reading."
    assert "Account pool: Nothing here says when work resumes" in render_card(unknown)
    assert "*When the pool comes back:* Nothing here says when work resumes" in render_card(unknown, "slack")
