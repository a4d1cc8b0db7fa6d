"""`pacer simulate`: the scenario validator, the demand it expands to, and short deterministic runs
of the real scheduler on a virtual clock under each policy (docs/simulate.md)."""

from __future__ import annotations

import json
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.simulate import ScenarioError, load_scenario, parse_scenario, score, simulate
from bot.simulate.demand import expand
from bot.simulate.scoring import percentile
from templates import render
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples" / "scenarios"

SMALL = """
[simulation]
start = "2026-11-02T00:00:00Z"
duration = "2h"
seed = 5

[policy]
reserve_5h_pct = 20
reserve_7d_pct = 20
max_sessions = 3
agent_workers = 12

[[windows]]
name = "5h"
period = "5h"
budget_usd = 30
first_reset = "+1h"

[[windows]]
name = "7d"
period = "7d"
budget_usd = 3000
first_reset = "+7d"

[[runtimes]]
name = "claude_code"
burn_usd_per_min = 0.2

[[arrivals]]
at = "+5m"
genesis = "github_label"
duration = "25m"
count = 8
every = "1m"

[[arrivals]]
at = "+20m"
genesis = "command"
duration = "15m"
count = 3
every = "20m"
turns = 1
replies = ["+5m"]
"""


def small(**changes: Any) -> dict[str, Any]:
    data = tomllib.loads(SMALL)
    for dotted, value in changes.items():
        *path, key = dotted.split(".")
        node: Any = data
        for part in path:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is None:
            node.pop(key)
        else:
            node[key] = value
    return data


# --------------------------------------------------------------------------- the validator


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"simulation.speed": 2}, "simulation.speed: is not a key here"),
        ({"arrivals.0.count": 0}, "arrivals[0].count: must be a whole number >= 1"),
        ({"arrivals.1.count": 2.5}, "arrivals[1].count: must be a whole number >= 1"),
        ({"arrivals.0.at": "yesterday"}, "arrivals[0].at: must be +<duration> from the start"),
        ({"arrivals.0.at": "2026-11-02T03:00:00"}, "which has no offset"),
        ({"arrivals.0.genesis": "email"}, "arrivals[0].genesis: must be one of command, slack"),
        ({"arrivals.0.class": "urgent"}, "arrivals[0].class: must be one of priority, spot"),
        ({"arrivals.0.runtime": "gpt"}, "arrivals[0].runtime: must name a [[runtimes]] entry: claude_code"),
        ({"arrivals.0.duration": "soon"}, "arrivals[0].duration: must be a duration such as 90m"),
        (
            {"arrivals.0.duration": "0m"},
            "arrivals[0].duration: must be a duration such as 90m, 5h, 7d or 1h30m (above zero)",
        ),
        ({"arrivals.1.replies": ["5m"]}, "arrivals[1].replies[0]: must be an offset from the arrival such as +20m"),
        ({"arrivals.1.duration": ["10m", "5m"]}, "arrivals[1].turns: leave it out when duration lists every turn"),
        ({"policy.reserve_5h_pct": 120}, "policy.reserve_5h_pct: must be a number >= 0 and <= 100"),
        ({"policy.max_sessions": 0}, "policy.max_sessions: must be a whole number >= 1"),
        ({"policy.gating": "yes"}, "policy.gating: must be true or false"),
        ({"windows.0.name": "1h"}, "windows[0].name: must be one of 5h, 7d"),
        ({"windows.1.name": "5h"}, "windows[1].name: '5h' appears more than once"),
        ({"windows.0.budget_usd": -5}, "windows[0].budget_usd: must be a number above 0"),
        ({"windows.0.first_reset": "+6h"}, "windows[0].first_reset: must fall after the start and within one period"),
        ({"windows.0.budget_usd": None}, "windows[0].budget_usd: is required"),
        ({"runtimes.0.burn_usd_per_min": "cheap"}, "runtimes[0].burn_usd_per_min: must be a number >= 0"),
        ({"simulation.duration": "a week"}, "simulation.duration: must be a duration"),
        ({"simulation.start": None}, "simulation.start: is required"),
    ],
)
def test_a_bad_key_or_value_is_an_error_naming_it(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(small(**changes))
    assert message in str(caught.value)


def test_generators_and_accounts_are_validated_too() -> None:
    data = small()
    data["generators"] = [{"genesis": "api", "rate_per_hour": 0, "duration": "10m"}]
    with pytest.raises(ScenarioError, match=r"generators\[0\]\.rate_per_hour: must be a number above 0"):
        parse_scenario(data)
    data["generators"] = [{"genesis": "api", "rate_per_hour": 2, "duration": ["30m", "10m"]}]
    with pytest.raises(ScenarioError, match=r"generators\[0\]\.duration: the high end must not be below the low end"):
        parse_scenario(data)
    data.pop("generators")
    data["accounts"] = [
        {"name": "a", "capacity_5h_usd": 10, "capacity_7d_usd": 100, "readings": [{"at": "+1h", "status": "gone"}]}
    ]
    with pytest.raises(ScenarioError, match=r"accounts\[0\]\.readings\[0\]\.status: must be one of active"):
        parse_scenario(data)
    data["accounts"][0]["readings"] = []
    with pytest.raises(ScenarioError, match=r"windows\[0\]\.budget_usd: leave it out with \[\[accounts\]\]"):
        parse_scenario(data)


def test_a_file_that_is_not_toml_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "week.toml"
    bad.write_text("[simulation\nstart=")
    with pytest.raises(ScenarioError, match="week.toml: is not valid TOML"):
        load_scenario(str(bad))


@pytest.mark.parametrize("name", ["calm", "saturated", "label_storm", "provider_reported"])
def test_the_example_scenarios_validate(name: str) -> None:
    scenario = load_scenario(str(EXAMPLES / f"{name}.toml"))
    assert scenario.duration >= timedelta(days=1) and expand(scenario)


def test_demand_is_deterministic_and_batches_expand() -> None:
    data = small()
    data["generators"] = [{"genesis": "schedule", "rate_per_hour": 6, "duration": ["10m", "20m"], "turns": [0, 2]}]
    first, again = expand(parse_scenario(data)), expand(parse_scenario(data))
    assert first == again
    labels = [d for d in first if d.genesis == "github_label"]
    start = datetime(2026, 11, 2, tzinfo=UTC)
    assert [d.at for d in labels] == [start + timedelta(minutes=5 + k) for k in range(8)]
    generated = [d for d in first if d.genesis == "schedule"]
    assert generated and all(
        timedelta(minutes=10) <= t <= timedelta(minutes=20) for d in generated for t in d.durations
    )
    assert all(1 <= len(d.durations) <= 3 for d in generated)
    assert [d.index for d in first] == list(range(len(first)))


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 50) == 0.0
    assert percentile([5.0, 1.0, 3.0], 50) == 3.0
    assert percentile(list(map(float, range(1, 101))), 99) == 99.0


# --------------------------------------------------------------------------- runs


@pytest.fixture(scope="module")
def reports() -> dict[str, dict[str, Any]]:
    scenario = parse_scenario(tomllib.loads(SMALL), name="small")
    return {policy: score(simulate(scenario, policy)) for policy in ("pacer", "fifo", "flat-target")}


def test_no_arrival_is_lost_and_priority_never_waits(reports: dict[str, dict[str, Any]]) -> None:
    for policy, r in reports.items():
        assert r["lost"] == 0, (policy, r["lost_sessions"])
        assert r["sessions"] == 11 and sum(r["states"].values()) == 11
        assert r["priority_start_delay_minutes"]["max"] == 0.0 and r["priority_start_delay_minutes"]["turns"] == 6


def test_budget_accounting_is_consistent(reports: dict[str, dict[str, Any]]) -> None:
    for r in reports.values():
        five = r["windows"]["5h"]
        by_window = sum(i["spent_usd"] for i in five["instances"])
        assert by_window == pytest.approx(r["spent_usd"], abs=0.05)  # every dollar lands in exactly one window
        assert r["spot_spent_usd"] <= r["spent_usd"]
        assert five["rollovers"] == 0 and [i["complete"] for i in five["instances"]] == [False, False]
        assert five["nonreserved_usd"] == 24.0
        assert 0 < sum(r["wall_seconds_by_part"].values()) <= r["wall_seconds"] and r["cpu_seconds"] > 0


def test_the_gate_holds_back_what_fifo_spends_into_the_reserve(reports: dict[str, dict[str, Any]]) -> None:
    pacer, fifo = reports["pacer"], reports["fifo"]
    assert fifo["windows"]["5h"]["spot_overshoot_usd"] > pacer["windows"]["5h"]["spot_overshoot_usd"]
    assert fifo["rechecks"] <= pacer["rechecks"]  # fifo holds only on slots
    assert pacer["spot_wait_all_minutes"]["p50"] >= fifo["spot_wait_all_minutes"]["p50"]
    assert reports["flat-target"]["pauses"] == 0 and fifo["pauses"] == 0  # the baselines never pause


def test_the_report_renders_and_compares(reports: dict[str, dict[str, Any]]) -> None:
    from bot.simulate.cli import compare_rows
    from templates import render

    text = render("text/simulate_report.j2", r=reports["pacer"])
    assert 'Simulated "small" under pacer' in text and "lost 0" in text and "[ok] no_lost_sessions" in text
    table = render("text/simulate_compare.j2", scenario="small", reports=list(reports.values()), binding="5h",
                   rows=compare_rows(list(reports.values())))
    assert "flat-target" in table and "sessions lost" in table
    json.dumps(reports)  # the --json body


def test_compare_prints_each_policys_checks_as_its_single_run_does(reports: dict[str, dict[str, Any]]) -> None:
    from bot.simulate.cli import compare_rows

    table = render("text/simulate_compare.j2", scenario="small", reports=list(reports.values()), binding="5h",
                   rows=compare_rows(list(reports.values())))
    for policy, r in reports.items():
        single = render("text/simulate_report.j2", r=r)
        block = single[single.index("Checks ("):]
        assert block.count("\n  [") == len(r["checks"]) == 5
        assert block.replace("Checks (", f"Checks under {policy} (", 1) in table
    order = [table.index(f"Checks under {policy} (") for policy in ("pacer", "fifo", "flat-target")]
    assert order == sorted(order)
    assert "sessions lost" in table[: table.index("Checks under pacer")]  # the side-by-side table comes first


def test_the_cli_writes_json_and_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    from bot.cli.main import main

    scenario = tmp_path / "tiny.toml"
    scenario.write_text(SMALL.replace('duration = "2h"', 'duration = "40m"', 1))
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    assert main(["simulate", str(scenario), "--policy", "fifo", "--json", str(out), "--plot", str(png)]) == 0
    assert json.loads(out.read_text())["policy"] == "fifo"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "under fifo" in capsys.readouterr().out


def test_the_cli_refuses_a_bad_scenario_without_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bot.cli.main import main

    bad = tmp_path / "bad.toml"
    bad.write_text(SMALL.replace("count = 8", "count = -1"))
    assert main(["simulate", str(bad)]) == 2
    assert "arrivals[0].count: must be a whole number >= 1" in capsys.readouterr().err
    assert main(["simulate"]) == 2
    assert "SCENARIO: name a scenario file" in capsys.readouterr().err


def test_from_db_replays_the_recorded_arrivals(tmp_path: Path) -> None:
    from bot.config import settings as settings_mod
    from bot.simulate.engine import Simulation
    from bot.simulate.replay import scenario_from_db

    recorded = parse_scenario(tomllib.loads(SMALL.replace('duration = "2h"', 'duration = "90m"', 1)), name="recorded")
    url = f"sqlite:///{tmp_path}/sim.db"
    sim = Simulation(recorded, "fifo", database_url=url)
    try:
        sim.run()
        settings = settings_mod.load({"DATABASE_URL": url})
        replay = scenario_from_db(settings, None, tail=timedelta(minutes=70))
        with_file = scenario_from_db(settings, recorded, tail=timedelta(minutes=70))
    finally:
        sim.close()
    assert len(replay.arrivals) == 11 and replay.start == recorded.start + timedelta(minutes=5)
    labels = [a for a in replay.arrivals if a.genesis == "github_label"]
    commands = [a for a in replay.arrivals if a.genesis == "command"]
    assert len(labels) == 8 and all(
        a.scheduling_class == "spot" and a.durations == (timedelta(minutes=25),) for a in labels
    )
    # the follow-up is replayed as work; the turn the reply started is replayed as the reply
    assert [a.durations for a in commands[:2]] == [(timedelta(minutes=15), timedelta(minutes=15))] * 2
    assert all(a.replies == (timedelta(minutes=5),) for a in commands)
    # without a scenario file: the deployment's settings and policy row
    assert [w.budget_usd for w in replay.windows] == [settings.window_5h_usd, settings.window_7d_usd]
    assert replay.policy.gating is False and with_file.policy == recorded.policy  # fifo ran with gating off
    report = score(simulate(with_file, "pacer"))
    assert report["lost"] == 0 and report["sessions"] == 11


def test_an_account_pool_replaces_the_ledger_windows() -> None:
    data = small()
    for w in data["windows"]:
        w.pop("budget_usd")
    data["accounts"] = [
        {"name": "a", "capacity_5h_usd": 15, "capacity_7d_usd": 1500},
        {
            "name": "b",
            "capacity_5h_usd": 15,
            "capacity_7d_usd": 1500,
            "readings": [
                {"at": "+0m", "status": "active", "external_5h_pct": 50},
                {"at": "+30m", "status": "needs_reauth"},
            ],
        },
    ]
    scenario = parse_scenario(data, name="pool")
    assert scenario.budget("5h") == 30 and scenario.budget("7d") == 3000
    from bot.simulate.meter import AccountsMeter

    meter = AccountsMeter(scenario)
    reading = meter.read(scenario.start)
    five = next(w for w in reading.windows if w.name == "5h")
    assert five.utilization == pytest.approx(0.25) and five.capacity_usd == 30  # (0 + 0.5) / 2 accounts
    meter.start(1, scenario.start, 0.1)  # rotation: the emptier account takes the turn
    assert meter.placed[1] == "a"
    later = meter.read(scenario.start + timedelta(minutes=40))
    assert [a.status for a in later.accounts] == ["active", "needs_reauth"]
    assert later.accounts[0].utilization_5h == pytest.approx(4.0 / 15)
    meter.start(2, scenario.start + timedelta(minutes=40), 1.0)  # b is out: a takes it too
    full = meter.read(scenario.start + timedelta(minutes=55))  # $5.50 + $15 on a $15 window
    assert meter.placed[2] == "a" and full.accounts[0].status == "quota_exceeded"
    report = score(simulate(scenario, "pacer"))
    assert report["lost"] == 0 and report["windows"]["5h"]["capacity_usd"] == 30


def test_the_meter_splits_a_turn_that_straddles_a_windows_start_as_the_ledger_does() -> None:
    """A turn run 05:00-08:00 for $12 is $8 of the window that opened at 06:00 — whether the
    window was read while it ran (kept up as it finishes) or first read after (worked out then)."""
    from bot.simulate.meter import Ledger

    t = datetime(2026, 11, 2, 5, tzinfo=UTC)
    hour = timedelta(hours=1)
    window = t + hour
    kept, fresh = Ledger(), Ledger()
    for ledger in (kept, fresh):
        ledger.start(1, t, 4.0 / 60)  # $4 an hour
        ledger.start(2, t + 2 * hour, 4.0 / 60)
    assert kept.spent(window, t + 2 * hour) == pytest.approx(4.0)  # accrued inside the window only
    for ledger in (kept, fresh):
        ledger.finish(1, t + 3 * hour, 12.0)
        ledger.finish(2, t + 3 * hour, 4.0)
    for ledger in (kept, fresh):
        assert ledger.spent(window, t + 3 * hour) == pytest.approx(8.0 + 4.0)
        assert ledger.spent(t, t + 3 * hour) == pytest.approx(16.0)


def test_the_report_says_what_the_cost_caps_did() -> None:
    """P15: a session's cost cap in a scenario is the one `/pacer new --cap` sets; the report
    counts the capped sessions, what they spent, who was held at the cap and what was halted.
    The eight label sessions burn $0.20/min for 25 minutes ($5 each) under a $2 cap."""
    scenario = parse_scenario(small(**{"arrivals.0.cost_cap_usd": 2}), name="capped")
    report = score(simulate(scenario, "pacer"))
    caps = report["cost_caps"]
    assert caps["capped_sessions"] == 8 and caps["halted_turns"] >= 1 and caps["held_at_cap"] >= 1, caps
    assert caps["capped_spent_usd"] <= 8 * 2.0 + caps["over_cap_usd"] + 0.005
    line = next(
        line for line in render("text/simulate_report.j2", r=report).splitlines() if line.startswith("Cost caps:")
    )
    assert line.startswith("Cost caps: 8 sessions capped · $") and "held at their cap at the end" in line, line
    with pytest.raises(ScenarioError, match=r"arrivals\[0\].cost_cap_usd"):
        parse_scenario(small(**{"arrivals.0.cost_cap_usd": -1}))
