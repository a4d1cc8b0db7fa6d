"""What `pacer serve` refuses to start with, beyond one bad value: settings that are each valid but
do not work together, or that the machine cannot honour.

`bot.config.settings.load` checks each value, and `pacer config` or `pacer policy` may well run on a
laptop with a production file; these checks ask about the machine the server starts on (the agent
on PATH, Fly's ephemeral disk), so they run when a server or console starts, not on every read.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path

from bot.config.settings import Settings
from scheduler.errors import ConfigError
from templates import error_text


def problems(settings: Settings, environ: Mapping[str, str], *, serving: bool = True) -> list[str]:
    """Every reason this process should not start, one line each, most fundamental first.
    `serving=False` (the console) asks only what running turns here needs."""
    found = database_problems(settings, environ) if serving else []
    found.extend(_runner(settings, environ))
    if serving:
        found.extend(_slack(settings))
    return found


def database_problems(settings: Settings, environ: Mapping[str, str]) -> list[str]:
    """On Fly (FLY_APP_NAME set) the database must be PostgreSQL: a SQLite file lives on the
    machine's disk, which the next deploy replaces. `pacer migrate` (the release command) asks
    this too, so a deploy without DATABASE_URL fails at release, before any machine is replaced.
    Worker machines take turns through PostgreSQL: PACER_TURN_QUEUE=procrastinate needs it."""
    if environ.get("FLY_APP_NAME") and settings.sqlite:
        return [error_text("settings/fly_sqlite", app=environ["FLY_APP_NAME"], url=settings.database_url)]
    if settings.turn_queue == "procrastinate" and settings.sqlite:
        return [error_text("settings/turn_queue_sqlite")]
    return []


def check(settings: Settings, environ: Mapping[str, str], *, serving: bool = True) -> None:
    """Raise ConfigError with the first problem, so start-up stops on one line."""
    found = problems(settings, environ, serving=serving)
    if found:
        raise ConfigError(found[0])


def _runner(settings: Settings, environ: Mapping[str, str]) -> list[str]:
    if settings.runner != "command":
        return []
    try:
        words = shlex.split(settings.runner_command)
    except ValueError:
        return []  # the runner itself names what is wrong with the template when it is built
    if not words:
        return [error_text("settings/runner_command_empty")]
    program = words[0]
    if "/" in program:
        # A relative path is resolved from each session's working directory, which does not
        # exist yet; only an absolute one can be checked now.
        missing = Path(program).is_absolute() and not (Path(program).is_file() and shutil.which(program))
        return [error_text("settings/agent_not_found", program=program, path="")] if missing else []
    path = environ.get("PATH", "")
    if shutil.which(program, path=path) is None:
        return [error_text("settings/agent_not_found", program=program, path=f"PATH={path}")]
    return []


def _slack(settings: Settings) -> list[str]:
    """Slack wants a bot token to answer with, and in HTTP mode a signing secret to verify
    requests with; Socket Mode (SLACK_APP_TOKEN) is authenticated by its connection instead."""
    present = [name for name, value in (("SLACK_SIGNING_SECRET", settings.slack_signing_secret),
                                        ("SLACK_APP_TOKEN", settings.slack_app_token)) if value]
    if present and not settings.slack_bot_token:
        return [error_text("settings/slack_missing", present=present, missing=["SLACK_BOT_TOKEN"], mode="token")]
    if settings.slack_bot_token and not present:
        return [
            error_text(
                "settings/slack_missing", present=["SLACK_BOT_TOKEN"], missing=["SLACK_SIGNING_SECRET"], mode="http"
            )
        ]
    return []


__all__ = ["check", "database_problems", "problems"]
