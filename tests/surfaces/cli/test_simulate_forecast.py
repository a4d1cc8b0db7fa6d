"""How good the start-time forecast is, measured (issue 32, P20 item 3): `pacer simulate` forecasts
each session as it begins to wait, from the simulated store, and scores the forecast against the
start that happened. In a scenario built for it — two slots, turns of exactly the length a turn is
expected to run with no history yet — walking virtual time starts every waiter inside its range."""

from __future__ import annotations

import tomllib
from datetime import timedelta
from pathlib import Path

import pytest

from bot.cli.main import main
from bot.simulate import parse_scenario, score, simulate

SCENARIO = """
[simulation]
name = "two slots, a queue of four"
start = "2026-11-02T00:00:00Z"
duration = "4h"
seed = 1

[policy]
max_sessions = 2
agent_workers = 2
preemption = false

[[windows]]
name = "5h"
period = "5h"
budget_usd = 100000
first_reset = "+5h"

[[runtimes]]
name = "claude_code"
burn_usd_per_min = 0.25

[[arrivals]]
at = "+0m"
genesis = "github_label"
duration = "30m"
count = 2

[[arrivals]]
at = "+10m"
genesis = "github_label"
duration = "30m"
count = 4
"""


def test_every_waiter_starts_inside_the_range_it_was_given() -> None:
    run = simulate(parse_scenario(tomllib.loads(SCENARIO)), forecasts=True)
    assert len(run.forecasts) == 4  # the two first arrivals started at once: nothing to forecast
    started = {i.session_id: i.started_at for i in run.pool.work.items.values() if i.turn == 0}
    start = run.scenario.start
    for sid, made in run.forecasts.items():
        assert made is not None and made.high is not None
        assert made.low <= started[sid] <= made.high, (sid, made, started[sid])
    assert sorted((started[sid] - start) for sid in run.forecasts) == [timedelta(minutes=m) for m in (30, 30, 60, 60)]
    report = score(run)["forecast"]
    assert report == {"forecasts": 4, "scored": 4, "no_forecast": 0, "not_started": 0, "error_p50_minutes": 0.0,
                      "error_p90_minutes": 0.0, "inside_range_pct": 100.0}


def test_a_run_without_forecasts_makes_none_and_runs_the_same() -> None:
    scenario = parse_scenario(tomllib.loads(SCENARIO))
    plain, forecast = simulate(scenario), simulate(scenario, forecasts=True)
    assert plain.forecasts == {} and score(plain)["forecast"] is None
    spans = [(s.session_id, s.started, s.ended) for s in plain.pool.spans.values()]
    assert spans == [(s.session_id, s.started, s.ended) for s in forecast.pool.spans.values()]


def test_the_cli_scores_forecasts_only_when_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Forecasting every waiter runs the queue forward again and again (several times the run on
    the examples), so `pacer simulate` does it on `--forecasts` only; without it the report is what
    it was before forecasts existed."""
    scenario = tmp_path / "four.toml"
    scenario.write_text(SCENARIO)
    assert main(["simulate", str(scenario)]) == 0
    plain = capsys.readouterr().out
    assert main(["simulate", str(scenario), "--forecasts"]) == 0
    scored = capsys.readouterr().out
    assert "Start-time forecast" not in plain and "Re-checks executed" in plain
    assert "Start-time forecast, made as each session began to wait, against its first start: error of the median " \
           "p50 0.0 min · p90 0.0 min · 100.0% of starts inside the range · 4 scored" in scored
    assert main(["simulate", str(scenario), "--compare", "--forecasts"]) == 0
    assert "start forecast error p50 min / % in range" in capsys.readouterr().out
    assert main(["simulate", str(scenario), "--compare"]) == 0
    assert "start forecast" not in capsys.readouterr().out
