"""The preemption cycling report on every surface: `/pacer holds` (text and Block Kit), the App
Home, `/metrics` and the simulation report. The ledger is written as the scheduler writes it
(`tests/rules/test_cycling.py` drives real preemptions); here it is seeded, so each surface is read
against one known report."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest

from bot.chat import answers
from bot.config.settings import load
from bot.observe.metrics_collector import DatabaseCollector
from bot.runtime.process import Pacer
from bot.simulate.scoring import cycling_report
from bot.slack.home import home_view
from scheduler.rules.cycling import Event
from scheduler.store.db import session_scope
from scheduler.store.models import PreemptionEvent, Turn
from templates import render
from tests.support import harness
from tests.support.api_client import make_api
from tests.support.harness import T0

H = timedelta(hours=1)


@pytest.fixture
def pacer(engine, clock) -> Pacer:
    ctx, deferrer, _workers, _quota = harness.build(engine, clock, max_sessions=2, wired=True)
    return Pacer(
        settings=load({"PACER_ROSTER": "UOP=operator"}, toml_path=None),
        engine=engine,
        clock=clock,
        deferrer=deferrer,
        ctx=ctx,
    )


def seed_cycle(pacer: Pacer) -> tuple[int, int, int]:
    """Spot session `victim` preempted three times in the last day, twice by `taker` (once with a
    halted turn that had spent $1.25); `other` took the third."""
    ctx = pacer.ctx
    victim = harness.new(ctx, title="nightly refactor")
    taker = harness.new(ctx, title="hotfix", scheduling_class="priority")
    other = harness.new(ctx, title="incident")
    now = ctx.clock.now()
    with session_scope(pacer.engine) as db:
        turn = Turn(session_id=victim, status="halted", outcome="halted", cost_usd=1.25, created_at=now - 5 * H)
        db.add(turn)
        db.flush()
        db.add(PreemptionEvent(session_id=victim, by_id=taker, turn_id=turn.id, at=now - 5 * H, halted=True))
        db.add(PreemptionEvent(session_id=victim, by_id=taker, at=now - 3 * H))
        db.add(PreemptionEvent(session_id=victim, by_id=other, at=now - 1 * H))
        db.add(PreemptionEvent(session_id=other, by_id=taker, at=now - 30 * H))  # a day and more ago
    return victim, taker, other


def test_holds_names_the_cycling_session_the_pair_and_the_cost(pacer) -> None:
    victim, taker, other = seed_cycle(pacer)
    text = answers.answer(pacer, "UOP", "holds", surface="console").text
    assert "Preemption cycling (the last 24 h: 3 preemptions, $1.25 lost to halted turns)" in text
    assert f"#{victim} nightly refactor · preempted 3 times (1 halted) by #{taker}, #{other} · $1.25 lost" in text
    assert (
        f"#{victim} nightly refactor and #{taker} hotfix · #{taker} took #{victim}'s slot 2 times · $1.25 lost" in text
    )
    assert "No holds in force" in text  # not a hold: said beside them


def test_holds_says_nothing_of_cycling_when_nothing_cycles(pacer) -> None:
    text = answers.answer(pacer, "UOP", "holds", surface="console").text
    assert "cycling" not in text


def test_holds_in_slack_puts_the_report_under_the_heading(pacer) -> None:
    victim, taker, _other = seed_cycle(pacer)
    answer = answers.answer(pacer, "UOP", "holds", surface="slack")
    sections = [b["text"]["text"] for b in answer.blocks if b["type"] == "section"]
    assert sections[0].startswith("*Preemption cycling*")
    assert f"*#{victim}* nightly refactor · preempted 3 times" in sections[0] and f"*#{taker}* hotfix" in sections[0]


def test_the_app_home_shows_it_under_the_gate_card(pacer) -> None:
    victim, _taker, _other = seed_cycle(pacer)
    texts = [b["text"]["text"] for b in home_view(pacer, "UOP")["blocks"] if b["type"] == "section"]
    [report] = [t for t in texts if t.startswith("*Preemption cycling*")]
    assert f"*#{victim}* nightly refactor · preempted 3 times (1 halted)" in report and "$1.25 lost" in report


def test_the_api_holds_carry_the_same_report(engine, clock) -> None:
    api = make_api(engine, clock)
    try:
        victim, taker, _other = seed_cycle(api.pacer)
        out = api.get("/holds").json()
    finally:
        api.close()
    [s] = out["cycling"]["sessions"]
    assert (s["session_id"], s["preemptions"], s["halted"], s["cost_lost_usd"]) == (victim, 3, 1, 1.25)
    [p] = out["cycling"]["pairs"]
    assert (p["first_id"], p["second_id"], p["first_yielded"], p["second_yielded"]) == (victim, taker, 2, 0)


def test_metrics_count_the_cycling_sessions_pairs_and_cost(pacer) -> None:
    seed_cycle(pacer)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in DatabaseCollector(pacer.engine, pacer.ctx).collect() for s in family.samples}
    assert samples[("pacer_preemption_cycling_sessions", ())] == 1
    assert samples[("pacer_preemption_cycling_pairs", ())] == 1
    assert samples[("pacer_preemption_lost_usd", (("of", "all"),))] == 1.25
    assert samples[("pacer_preemption_lost_usd", (("of", "cycling"),))] == 1.25


def test_the_simulation_report_counts_cycling_at_any_moment_of_the_run() -> None:
    day = 24 * H
    events = [
        Event(1, 9, T0 + 1 * H, halted=True, cost_lost_usd=2.0),
        Event(1, 8, T0 + 2 * H),
        Event(1, 7, T0 + 3 * H),
        Event(2, 9, T0 + 5 * H, halted=True, cost_lost_usd=0.5),  # alone: lost, but not cycling
        Event(3, 4, T0 + 2 * day),
        Event(4, 3, T0 + 2 * day + H, halted=True, cost_lost_usd=1.0),  # a mutual pair, later
        Event(5, 6, T0 + 4 * day),
        Event(5, 6, T0 + 5 * day + H),  # more than a day apart
    ]
    found = cycling_report(SimpleNamespace(preemption_events=events))
    assert found == {"cycling_sessions": 1, "cycling_pairs": 1, "cycling_most_in_a_day": 3,
                     "preemption_lost_usd": 3.5, "cycling_lost_usd": 3.0}
    line = next(
        ln
        for ln in render("text/simulate_report.j2", r=_report(found)).splitlines()
        if ln.startswith("Preemption cycling")
    )
    assert line == (
        "Preemption cycling: 1 session preempted 3 or more times in 24 h (at most 3) · 1 pair with 2 or more "
        "between them · $3.50 lost to halted turns ($3.00 of it cycling)"
    )


def _report(cycling: dict) -> dict:
    """The least of a report the text template reads, around the cycling figures."""
    return {
        "scenario": "s",
        "policy": "pacer",
        "start": T0.isoformat(),
        "end": T0.isoformat(),
        "sessions": 0,
        "turns": 0,
        "spent_usd": 0.0,
        "spot_spent_usd": 0.0,
        "binding_window": "5h",
        "windows": {},
        "forecast": None,  # scored only with `pacer simulate --forecasts`
        "idle_while_holding": {"minutes": 0, "episodes": 0, "longest_minutes": 0, "freed_slots": 0},
        "priority_start_delay_minutes": {"max": 0, "p99": 0, "turns": 0, "not_started": 0},
        "spot_wait_minutes": {},
        "rechecks": 0,
        "pauses": 0,
        "resumes": 0,
        "preemptions": 0,
        "preemptions_released": 0,
        "preemptions_halted": 0,
        "repreemptions_inside_cooldown": 0,
        "states": {},
        "lost": 0,
        "wall_seconds": 0,
        "cpu_seconds": 0,
        "simulated_seconds_per_wall_second": 0,
        "quota_reads": 0,
        "sweep_interval_minutes": 5,
        "one_sweep_of_fleet_burn_usd": 0.0,
        "checks": {},
        "cycling": cycling,
        "cost_caps": {
            "capped_sessions": 0,
            "capped_spent_usd": 0.0,
            "held_at_cap": 0,
            "halted_turns": 0,
            "over_cap_usd": 0.0,
        },
    }


CYCLE = """
[simulation]
start = "2026-11-02T00:00:00Z"
duration = "6h"
seed = 5

[policy]
max_sessions = 2
agent_workers = 12

[[windows]]
name = "5h"
period = "5h"
budget_usd = 3000
first_reset = "+5h"

[[runtimes]]
name = "claude_code"
burn_usd_per_min = 0.2

[[arrivals]]
at = "+1m"
genesis = "command"
duration = "500m"
turns = 1

[[arrivals]]
at = "+2m"
genesis = "github_label"
duration = "500m"
turns = 1

[[arrivals]]
at = "+10m"
genesis = "command"
duration = "20m"
count = 4
every = "45m"
turns = 1
"""


def test_a_simulated_run_reads_the_ledger_the_scheduler_kept() -> None:
    """One spot session beside a long priority one, and a priority arrival every 45 minutes
    (past the 30-minute cooldown): the spot session yields each time and cycles."""
    import tomllib

    from bot.simulate.engine import simulate
    from bot.simulate.scoring import score
    from bot.simulate.validate import parse_scenario

    run = simulate(parse_scenario(tomllib.loads(CYCLE), name="cycle"), "pacer")
    report = score(run)
    assert len(run.preemption_events) == report["preemptions"] - report["preemptions_released"] >= 3
    cycling = report["cycling"]
    assert (cycling["cycling_sessions"], cycling["cycling_pairs"]) == (1, 0)
    assert cycling["cycling_most_in_a_day"] == len(run.preemption_events)
    assert cycling["preemption_lost_usd"] == pytest.approx(
        sum(e.cost_lost_usd for e in run.preemption_events), abs=0.01
    )
