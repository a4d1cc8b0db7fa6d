"""`pacer simulate`: replay a scenario (or Pacer's own recorded arrivals) through the real
scheduler on a virtual clock, print the score, and compare policies.

    pacer simulate examples/scenarios/saturated.toml
    pacer simulate examples/scenarios/saturated.toml --compare --json out.json --plot out.png
    pacer simulate --from-db [SCENARIO.toml] --policy flat-target
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

# Kept light: `pacer serve` builds this parser too, so the simulation stack loads only when run.
from bot.simulate.scenario import POLICIES, Scenario, ScenarioError
from templates import error_text, render


def load_scenario(path: str) -> Scenario:
    """Read and validate a scenario file; a ScenarioError names the file and the key."""
    from bot.simulate.validate import parse_scenario

    file = Path(path)
    try:
        data = tomllib.loads(file.read_text())
    except OSError as exc:
        raise ScenarioError(error_text("simulate/unreadable", path=path, reason=exc.strerror or exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(error_text("simulate/not_toml", path=path, problem=exc)) from None
    return parse_scenario(data, name=file.stem)


def compare_rows(reports: list[dict[str, Any]]) -> list[tuple[str, str | None, list[str]]]:
    """The side-by-side table's rows: (what the row measures, its window or None, one cell per
    report). text/simulate_compare.j2 words each row."""
    binding = reports[0]["binding_window"]

    def cell(value: Any, fmt: str = "{}") -> str:
        return "—" if value is None else fmt.format(value)

    def each(get: Any, fmt: str = "{}") -> list[str]:
        return [cell(get(r), fmt) for r in reports]

    rows: list[tuple[str, str | None, list[str]]] = [
        ("min_spent", binding, each(lambda r: r["windows"][binding]["min_spent_pct"], "{:.1f}")),
        ("mean_spent", binding, each(lambda r: r["windows"][binding]["mean_spent_pct"], "{:.1f}")),
        ("mean_used", binding, each(lambda r: r["windows"][binding]["mean_used_pct"], "{:.1f}")),
    ]
    for name in reports[0]["windows"]:
        rows.append(("breaches", name, each(lambda r, n=name: r["windows"][n]["breaches"])))
        rows.append(("overshoot", name, each(lambda r, n=name: r["windows"][n]["max_spot_overshoot_usd"], "{:.2f}")))
    rows += [
        ("spent", None, each(lambda r: r["spent_usd"], "{:.2f}")),
        ("idle", None, each(lambda r: r["idle_while_holding"]["minutes"])),
        ("priority_delay", None, each(lambda r: r["priority_start_delay_minutes"]["max"])),
        (
            "spot_wait",
            None,
            each(
                lambda r: (r["spot_wait_all_minutes"]["p50"], r["spot_wait_all_minutes"]["p95"]),
                "{0[0]:.0f} / {0[1]:.0f}",
            ),
        ),
        ("not_started", None, each(lambda r: r["spot_wait_all_minutes"]["not_started"])),
        *([(
            "forecast",
            None,
            each(lambda r: (r["forecast"]["error_p50_minutes"], r["forecast"]["inside_range_pct"] or 0.0),
                 "{0[0]:.0f} / {0[1]:.0f}"),
        )] if reports[0]["forecast"] is not None else []),
        ("rechecks", None, each(lambda r: r["rechecks"])),
        ("pauses", None, each(lambda r: (r["pauses"], r["resumes"]), "{0[0]} / {0[1]}")),
        (
            "preemptions",
            None,
            each(lambda r: (r["preemptions"], r["repreemptions_inside_cooldown"]), "{0[0]} ({0[1]})"),
        ),
        ("lost", None, each(lambda r: r["lost"])),
        ("wall", None, each(lambda r: r["wall_seconds"])),
    ]
    return rows


def run_policy(scenario: Scenario, policy: str, *, forecasts: bool = False) -> tuple[dict[str, Any], Any]:
    from bot.simulate.engine import simulate
    from bot.simulate.scoring import score

    with progress_bar(scenario, policy) as progress:
        run = simulate(scenario, policy, progress=progress, forecasts=forecasts)
    return score(run), run


@contextmanager
def progress_bar(scenario: Scenario, policy: str) -> Iterator[Callable[[datetime], None] | None]:
    """A bar of simulated hours on stderr, only when stderr is a terminal: the report on stdout,
    and any stderr that is a file or a pipe, stay exactly as they were."""
    if not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm  # type: ignore[import-untyped]

    hour = timedelta(hours=1)
    with tqdm(total=math.ceil(scenario.duration / hour), desc=error_text("simulate/progress", policy=policy),
              unit="h", file=sys.stderr, leave=False, dynamic_ncols=True) as bar:
        yield lambda now: bar.update(int((now - scenario.start) / hour) - bar.n)


def cmd_simulate(args: argparse.Namespace) -> int:
    try:
        scenario = _scenario(args)
    except ScenarioError as exc:
        return _refuse(str(exc))
    if args.plot:
        from bot.simulate.plot import check_plot_path, require_matplotlib

        problem = require_matplotlib() or check_plot_path(args.plot)
        if problem:
            return _refuse(problem)
    policies = list(POLICIES) if args.compare else [args.policy]
    reports, runs = [], []
    for policy in policies:
        report, run = run_policy(scenario, policy, forecasts=args.forecasts)
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
        from bot.simulate.plot import plot_runs

        try:
            plot_runs(runs, reports, args.plot)
        except OSError as exc:
            print(
                error_text(
                    "simulate/refused",
                    problem=error_text("simulate/plot_failed", path=args.plot, reason=exc.strerror or exc),
                ),
                file=sys.stderr,
            )
            return 1
        print(error_text("simulate/plot_written", path=args.plot, policies=policies))
    return 0


def _refuse(problem: str) -> int:
    print(error_text("simulate/refused", problem=problem), file=sys.stderr)
    return 2


def _scenario(args: argparse.Namespace) -> Scenario:
    if args.from_db:
        from bot.config import settings as settings_mod
        from bot.simulate.replay import scenario_from_db

        settings = settings_mod.load(os.environ, toml_path=getattr(args, "config", None))
        base = load_scenario(args.scenario) if args.scenario else None
        return scenario_from_db(settings, base, since=args.since)
    if not args.scenario:
        raise ScenarioError(error_text("simulate/no_scenario"))
    return load_scenario(args.scenario)


def register(sub: Any) -> None:
    sim = sub.add_parser(
        "simulate", help="replay a week of demand through the real scheduler on a virtual clock",
        description="Run the real scheduler (gate, holds, sweeps, preemption, promotion) over a scenario "
        "in virtual time and score it: budget spent by each rollover, reserve breaches, idle-while-holding, "
        "priority delay, spot waits. See docs/simulate.md for the scenario format.")
    sim.add_argument("scenario", nargs="?", metavar="SCENARIO.toml", help="the scenario (optional with --from-db)")
    sim.add_argument(
        "--policy", choices=POLICIES, default="pacer", help="the admission policy to replay under (default pacer)"
    )
    sim.add_argument(
        "--compare", action="store_true", help="run pacer, fifo and flat-target and print them side by side"
    )
    sim.add_argument("--json", metavar="OUT", help="write the report (or the three, with --compare) as JSON")
    sim.add_argument(
        "--plot",
        metavar="OUT.png",
        help="draw spend against the budget line per window, the fleet and what binds; "
        "with --compare, a column per policy (needs matplotlib)",
    )
    sim.add_argument(
        "--forecasts",
        action="store_true",
        help="also forecast each waiting arrival's start as Pacer would show it, and score the forecasts "
        "against the real starts (slow: several times the run)",
    )
    sim.add_argument("--from-db", action="store_true", help="replay the arrivals recorded in DATABASE_URL")
    sim.add_argument("--since", metavar="ISO-8601", help="with --from-db: replay sessions created from this instant")
    sim.set_defaults(func=cmd_simulate)
