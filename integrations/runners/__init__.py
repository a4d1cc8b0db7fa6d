"""Runners: what executes a turn, chosen by PACER_RUNNER, and the pool that runs them.

    runner = build_runner(settings)                 # EchoRunner or CommandRunner
    workers = build_pool(settings)                  # ThreadWorkerPool over it
    runtimes = runtimes_from_settings(settings)     # for scheduler.context.Context.runtimes

`echo` (echo.py) is the built-in agent, so Pacer runs with no account; `command` (command.py)
runs a CLI agent such as Claude Code per turn. outcomes.py reads what the agent said.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from bot.settings import Settings
from integrations.runners.command import CommandRunner
from integrations.runners.echo import EchoRunner
from integrations.runners.pool import ThreadWorkerPool
from scheduler.context import Runtime
from scheduler.ports import Runner

ECHO_RUNTIME = "echo"


def build_runner(settings: Settings, environ: Mapping[str, str] | None = None) -> Runner:
    """The runner PACER_RUNNER names. `environ` is what a command agent inherits (minus
    Pacer's secrets); it defaults to this process's environment."""
    if settings.runner == "echo":
        return EchoRunner(settings.echo_seconds, settings.echo_cost_usd)
    return CommandRunner(
        settings.runner_command,
        settings.runner_resume_args or "",
        settings.runtime_name,
        settings.turn_timeout_seconds,
        settings.workdir,
        env=os.environ if environ is None else environ,
    )


def build_pool(settings: Settings, runner: Runner | None = None) -> ThreadWorkerPool:
    """PACER_AGENT_WORKERS threads over `runner` (default: build_runner(settings))."""
    return ThreadWorkerPool(runner or build_runner(settings), settings.agent_workers)


def echo_burn_per_min(seconds: float, cost_usd: float) -> float:
    """The echo agent's dollars a minute: one turn's cost over one turn's length. A zero-second
    turn is priced as if it took a second, so the burn stays finite."""
    return cost_usd / ((seconds if seconds > 0 else 1.0) / 60.0)


def runtimes_from_settings(settings: Settings) -> dict[str, Runtime]:
    """Both runtimes Pacer knows: the echo agent (spends quota, like the agent it stands in
    for) and the command runtime under PACER_RUNTIME_NAME with PACER_RUNTIME_SPENDS_QUOTA."""
    runtimes = {
        ECHO_RUNTIME: Runtime(
            ECHO_RUNTIME, True, echo_burn_per_min(settings.echo_seconds, settings.echo_cost_usd)
        )
    }
    name = settings.runtime_name
    if name != ECHO_RUNTIME:
        runtimes[name] = Runtime(name, bool(settings.runtime_spends_quota))
    return runtimes


__all__ = [
    "CommandRunner",
    "EchoRunner",
    "ThreadWorkerPool",
    "build_pool",
    "build_runner",
    "echo_burn_per_min",
    "runtimes_from_settings",
]
