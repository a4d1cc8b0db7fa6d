"""Runners: what executes a turn, and the pool that runs them.

`echo` (echo.py) is the built-in agent, so Pacer runs with no account; `command` (command.py)
runs a CLI agent such as Claude Code per turn, its argv built by invocation.py. outcomes.py
reads what the agent said. Which one runs, with which values, is chosen from the settings in
`bot.runtime.adapters`.
"""

from __future__ import annotations

from integrations.runners.command import CommandRunner
from integrations.runners.echo import EchoRunner
from integrations.runners.pool import ThreadWorkerPool

ECHO_RUNTIME = "echo"


def echo_burn_per_min(seconds: float, cost_usd: float) -> float:
    """The echo agent's dollars a minute: one turn's cost over one turn's length. A zero-second
    turn is priced as if it took a second, so the burn stays finite."""
    return cost_usd / ((seconds if seconds > 0 else 1.0) / 60.0)


__all__ = [
    "ECHO_RUNTIME",
    "CommandRunner",
    "EchoRunner",
    "ThreadWorkerPool",
    "echo_burn_per_min",
]
