"""`pacer`: serve, worker, migrate, console, policy, config."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from bot.observe import logs
from scheduler.errors import ConfigError

CONSOLE_LOG = os.path.join("var", "console.log")


def _settings(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from bot.config import settings as settings_mod

    return settings_mod.load(os.environ, toml_path=getattr(args, "config", None))


def cmd_serve(args: argparse.Namespace) -> int:
    from bot.serve.server import serve
    from integrations.runners.custody import harden_process

    harden_process()
    settings = _settings(args)
    if args.demo:
        from bot.serve.demo import own_database

        settings = own_database(settings, os.environ)
    return serve(settings, host=args.host, port=args.port, demo=args.demo)


def cmd_migrate(args: argparse.Namespace) -> int:
    from bot.config.checks import database_problems
    from bot.config.settings import redact_url
    from scheduler.front import migrate

    settings = _settings(args)
    refused = database_problems(settings, os.environ)
    if refused:
        raise ConfigError(refused[0])
    migrate(settings.database_url)
    print(f"database at head: {redact_url(settings.database_url)}")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from bot.serve.worker import work
    from integrations.runners.custody import harden_process

    harden_process()
    return work(_settings(args))


def cmd_console(args: argparse.Namespace) -> int:
    from bot.cli.console import run_console

    settings = _settings(args)
    return run_console(settings, user=args.user, log=args.log)


def cmd_config(args: argparse.Namespace) -> int:
    from bot.config.settings import in_force
    from templates import render

    settings = _settings(args)
    print(render("text/config.j2", rows=in_force(settings)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pacer",
        description="Pacer: schedules AI coding-agent work under a finite quota. "
        "Priority work runs now; spot work soaks up what is left, deferred, never dropped.",
    )
    parser.add_argument("--config", help=CONFIG_HELP)
    parser.add_argument("--version", action="version", version=f"pacer {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser("serve", help="run the HTTP server and the scheduler", description=
        "Run Pacer: the HTTP app (health, API, Slack, GitHub) and the scheduler. On SQLite the "
        "database is migrated on start.")
    serve.add_argument("--host", help="bind address (default: PACER_HOST)")
    serve.add_argument("--port", type=int, help="bind port (default: PACER_PORT)")
    serve.add_argument(
        "--demo",
        action="store_true",
        help="add sample triggers and feed sample events, on a temporary database unless DATABASE_URL is set",
    )
    serve.set_defaults(func=cmd_serve)

    migrate = sub.add_parser("migrate", help="bring the database schema to head", description=
        "Apply every Alembic migration to DATABASE_URL. Fly's release command runs this.")
    migrate.set_defaults(func=cmd_migrate)

    worker = sub.add_parser(
        "worker",
        help="run turns for every pacer serve (PACER_TURN_QUEUE=procrastinate)",
        description="Take started turns from procrastinate's queue `turns` on DATABASE_URL (PostgreSQL) and run "
        "up to PACER_AGENT_WORKERS at once. SIGTERM: no new turn, PACER_DRAIN_SECONDS for the running "
        "ones, the rest handed back.",
    )
    worker.set_defaults(func=cmd_worker)

    console = sub.add_parser("console", help="the chat commands in a terminal", description=
        "The same /pacer commands and thread replies, typed at a prompt (line editing, history, Tab "
        "completion), answered with the same templates. No Slack needed. Beside a running pacer serve "
        "on the same database it speaks to the server with PACER_API_TOKEN.")
    console.add_argument("--user", help="roster user to speak as (default: PACER_CONSOLE_USER)")
    console.add_argument("--log", default=CONSOLE_LOG, metavar="FILE",
                         help=f"where log lines go, kept out of the answers (default: {CONSOLE_LOG}; - for stderr)")
    console.set_defaults(func=cmd_console)

    config = sub.add_parser("config", help="list every setting and the values in force", description=
        "Validate the configuration and print every variable's value in force (secrets and URL "
        "passwords as ***), where it came from (the environment, pacer.toml or the default), its "
        "meaning and its default.")
    config.set_defaults(func=cmd_config)

    from bot.cli import github_app, policy

    policy.register(sub)
    github_app.register(sub)
    for command in sub.choices.values():  # `pacer serve --config FILE` as well as `pacer --config FILE serve`
        command.add_argument("--config", default=argparse.SUPPRESS, help=CONFIG_HELP)
    return parser


CONFIG_HELP = "path to pacer.toml (default: $PACER_CONFIG, else ./pacer.toml if present)"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pacer")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _preflight(args: argparse.Namespace) -> None:
    """Logging as configured, before any line (pacer.toml's format included), then a word on
    each PACER_* variable that is no setting."""
    from bot.config.preflight import log_options, strays
    from bot.config.settings import VARIABLES
    from templates import render

    logs.configure(*log_options(os.environ, getattr(args, "config", None)))
    for stray in strays(os.environ, (var.name for var in VARIABLES)):
        logging.getLogger("pacer.config").warning(render("text/unknown_variable.j2", stray=stray))


SIGPIPE_EXIT = 128 + 13  # the status a shell shows for a writer ended by SIGPIPE


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of what the reader never took
    does not raise a second BrokenPipeError on the way out."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _preflight(args)  # before the settings are read, so their own errors and the first lines share the format
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader that stopped early (`| head`) fails here, not at interpreter exit
        return code
    except BrokenPipeError:
        _discard_stdout()
        return SIGPIPE_EXIT
    except ConfigError as exc:
        print(f"pacer: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
