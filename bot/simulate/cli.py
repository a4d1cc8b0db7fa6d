"""`pacer simulate`: replay a scenario (or Pacer's own recorded arrivals) through the real
scheduler on a virtual clock, print the score, and compare policies.

    pacer simulate examples/scenarios/saturated.toml
    pacer simulate examples/scenarios/saturated.toml --compare --json out.json --plot out.png
    pacer simulate --from-db [SCENARIO.toml] --policy flat-target
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

# Kept light: `pacer serve` builds this parser too, so the simulation stack loads only when run.
from bot.simulate.scenario import POLICIES, Scenario, ScenarioError


def load_scenario(path: str) -> Scenario:
    """Read and validate a scenario file; a ScenarioError names the file and the key."""
    from bot.simulate.validate import parse_scenario

    file = Path(path)
    try:
        data = tomllib.loads(file.read_text())
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: is not valid TOML ({exc})") from None
    return parse_scenario(data, name=file.stem)


def compare_rows(reports: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    binding = reports[0]["binding_window"]

    def cell(value: Any, fmt: str = "{}") -> str:
        return "—" if value is None else fmt.format(value)

    def each(get: Any, fmt: str = "{}") -> list[str]:
        return [cell(get(r), fmt) for r in reports]

    rows = [
        (f"{binding} budget spent by rollover, min %", each(lambda r: r["windows"][binding]["min_spent_pct"], "{:.1f}")),
        (f"{binding} budget spent by rollover, mean %", each(lambda r: r["windows"][binding]["mean_spent_pct"], "{:.1f}")),
        (f"{binding} budget used (capped at 100%), mean %", each(lambda r: r["windows"][binding]["mean_used_pct"], "{:.1f}")),
    ]
    for name in reports[0]["windows"]:
        rows.append((f"{name} reserve breaches by spot work", each(lambda r, n=name: r["windows"][n]["breaches"])))
        rows.append((f"{name} spot overshoot, worst window $", each(lambda r, n=name: r["windows"][n]["max_spot_overshoot_usd"], "{:.2f}")))
    rows += [
        ("total spent $", each(lambda r: r["spent_usd"], "{:.2f}")),
        ("idle while holding, minutes", each(lambda r: r["idle_while_holding"]["minutes"])),
        ("priority start delay max, min", each(lambda r: r["priority_start_delay_minutes"]["max"])),
        ("spot wait p50 / p95, min", [f"{r['spot_wait_all_minutes']['p50']:.0f} / {r['spot_wait_all_minutes']['p95']:.0f}" for r in reports]),
        ("spot sessions not started by the end", each(lambda r: r["spot_wait_all_minutes"]["not_started"])),
        ("re-checks executed", each(lambda r: r["rechecks"])),
        ("pauses / resumes", [f"{r['pauses']} / {r['resumes']}" for r in reports]),
        ("preemptions (re-preempted in cooldown)", [f"{r['preemptions']} ({r['repreemptions_inside_cooldown']})" for r in reports]),
        ("sessions lost", each(lambda r: r["lost"])),
        ("wall seconds", each(lambda r: r["wall_seconds"])),
    ]
    return rows


def run_policy(scenario: Scenario, policy: str) -> tuple[dict[str, Any], Any]:
    from bot.simulate.engine import simulate
    from bot.simulate.scoring import score

    run = simulate(scenario, policy)
    return score(run), run


def cmd_simulate(args: argparse.Namespace) -> int:
    from templates import render

    try:
        scenario = _scenario(args)
    except ScenarioError as exc:
        print(f"pacer simulate: {exc}", file=sys.stderr)
        return 2
    if args.plot:
        from bot.simulate.plot import require_matplotlib

        missing = require_matplotlib()
        if missing:
            print(f"pacer simulate: --plot: {missing}", file=sys.stderr)
            return 2
    policies = list(POLICIES) if args.compare else [args.policy]
    reports, runs = [], []
    for policy in policies:
        report, run = run_policy(scenario, policy)
        reports.append(report)
        runs.append(run)
        if not args.compare:
            print(render("text/simulate_report.j2", r=report))
    if args.compare:
        print(render("text/simulate_compare.j2", scenario=scenario.name, reports=reports,
                     binding=reports[0]["binding_window"], rows=compare_rows(reports)))
    if args.json:
        body = reports[0] if len(reports) == 1 else {"scenario": scenario.name, "reports": reports}
        Path(args.json).write_text(json.dumps(body, indent=2))
    if args.plot:
        from bot.simulate.plot import plot_run

        plot_run(runs[0], args.plot)
        print(f"plot written to {args.plot} ({runs[0].policy})")
    return 0


def _scenario(args: argparse.Namespace) -> Scenario:
    if args.from_db:
        from bot import settings as settings_mod
        from bot.simulate.replay import scenario_from_db

        settings = settings_mod.load(os.environ, toml_path=getattr(args, "config", None))
        base = load_scenario(args.scenario) if args.scenario else None
        return scenario_from_db(settings, base, since=args.since)
    if not args.scenario:
        raise ScenarioError("SCENARIO: name a scenario file (see examples/scenarios/), or pass --from-db")
    return load_scenario(args.scenario)


def register(sub: Any) -> None:
    sim = sub.add_parser(
        "simulate", help="replay a week of demand through the real scheduler on a virtual clock",
        description="Run the real scheduler (gate, holds, sweeps, preemption, promotion) over a scenario "
        "in virtual time and score it: budget spent by each rollover, reserve breaches, idle-while-holding, "
        "priority delay, spot waits. See docs/simulate.md for the scenario format.")
    sim.add_argument("scenario", nargs="?", metavar="SCENARIO.toml", help="the scenario (optional with --from-db)")
    sim.add_argument("--policy", choices=POLICIES, default="pacer", help="the admission policy to replay under (default pacer)")
    sim.add_argument("--compare", action="store_true", help="run pacer, fifo and flat-target and print them side by side")
    sim.add_argument("--json", metavar="OUT", help="write the report (or the three, with --compare) as JSON")
    sim.add_argument("--plot", metavar="OUT.png", help="draw a timeline per window (needs matplotlib)")
    sim.add_argument("--from-db", action="store_true", help="replay the arrivals recorded in DATABASE_URL")
    sim.add_argument("--since", metavar="ISO-8601", help="with --from-db: replay sessions created from this instant")
    sim.set_defaults(func=cmd_simulate)
