"""`pacer simulate`: the real scheduler replaying a scenario on a virtual clock (docs/simulate.md).

    from bot.simulate import load_scenario, simulate, score
    report = score(simulate(load_scenario("examples/scenarios/saturated.toml"), "pacer"))

The names load on first use: the CLI registers `pacer simulate` in every process (`pacer serve`
included), and only a simulation needs the scheduler stack behind it.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from templates import error_text

_WHERE = {
    "load_scenario": "bot.simulate.cli",
    "Run": "bot.simulate.engine",
    "Simulation": "bot.simulate.engine",
    "simulate": "bot.simulate.engine",
    "Scenario": "bot.simulate.scenario",
    "ScenarioError": "bot.simulate.scenario",
    "score": "bot.simulate.scoring",
    "parse_scenario": "bot.simulate.validate",
}
__all__ = ["Run", "Scenario", "ScenarioError", "Simulation", "load_scenario", "parse_scenario", "score", "simulate"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(error_text("simulate/no_such_name", name=name))
    return getattr(import_module(_WHERE[name]), name)
