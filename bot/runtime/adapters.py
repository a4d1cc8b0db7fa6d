"""The outbound adapters, built from the settings: the one place a setting becomes the plain value
an adapter takes. `integrations/` never reads settings; `bot.runtime.process` builds through here.

    runner = build_runner(settings, engine=engine)  # EchoRunner, or CommandRunner in workspaces
    workers = build_pool(settings, engine=engine)   # ThreadWorkerPool over it
    runtimes = runtimes_from_settings(settings)     # for scheduler.context.Context.runtimes
    source = build_quota_source(settings, engine)   # the agents' readings, the pool, or the ledger
    comments = github_comments(settings)            # PyGithub with a token or an App, or None
    spaces = build_workspaces(settings)             # a mirror per repository, a worktree per session
    dispatcher = build_dispatcher(settings)         # procrastinate for worker machines, or None
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import Engine, make_url

from bot.config.settings import FROM_DEFAULT, FROM_ENV, VARIABLES, Settings
from integrations.github.client import GithubClients
from integrations.github.comments import PyGithubComments
from integrations.github.publish import Publisher
from integrations.github.pulls import PyGithubPeople, PyGithubPulls
from integrations.quota import AgentsSource, LedgerSource, PoolSource, ReadingBook
from integrations.runners import (
    ECHO_RUNTIME,
    CommandRunner,
    EchoRunner,
    ThreadWorkerPool,
    echo_burn_per_min,
)
from integrations.runners.custody import Custody, choose
from integrations.runners.outcomes import model_option
from integrations.runners.workspace import WorkspaceRunner
from integrations.workspaces import GitRemote, Workspaces
from scheduler.context import Runtime
from scheduler.ports import QuotaSource, Runner
from scheduler.rules.burn import fallback_rates
from templates import render

if TYPE_CHECKING:
    from integrations.turn_queue import TurnQueue

log = logging.getLogger("pacer.custody")
AGENT_RUNTIMES = frozenset({"claude_code", "codex"})  # runtimes whose streams carry the provider's quota figures

def build_custody(settings: Settings) -> Custody:
    """Where agents run (custody.py): as PACER_AGENT_USER, in a sandbox, or as Pacer's own user;
    start-up says which, and what an agent could still reach."""
    custody = choose(
        user=settings.agent_user,
        sandbox=settings.agent_sandbox,
        home=settings.agent_home or _default_home(settings),
        binds=settings.agent_bind,
        passthrough=settings.agent_env,
        roots=(settings.workdir, settings.workspaces),
    )
    if custody.mode == "none":
        log.warning(render("text/custody.j2", mode=custody.mode))
    else:
        log.info(render("text/custody.j2", mode=custody.mode, user=custody.user.name if custody.user else None))
    custody.make_roots()
    if custody.user is not None:
        for path in readable_by_others(_pacers_files(settings)):
            log.warning(render("text/custody.j2", mode="exposed", path=path, user=custody.user.name))
    return custody


def _pacers_files(settings: Settings) -> list[str]:
    toml = {settings.origin(v.name) for v in VARIABLES} - {FROM_ENV, FROM_DEFAULT}
    found = [settings.triggers_file or "", *toml]
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database:
        found += [url.database, url.database + "-wal"]
    return [p for p in found if p]


def readable_by_others(paths: list[str]) -> list[str]:
    """Those of `paths` another user could read: the file is readable by others and every
    directory above it can be passed through."""
    exposed = []
    for path in map(os.path.abspath, paths):
        try:
            if os.stat(path).st_mode & 0o004 and all(os.stat(d).st_mode & 0o001 for d in _parents(path)):
                exposed.append(path)
        except OSError:
            continue
    return exposed


def _parents(path: str) -> list[str]:
    parents, parent = [], os.path.dirname(path)
    while parent and parent not in parents:
        parents.append(parent)
        if parent == os.path.dirname(parent):
            break
        parent = os.path.dirname(parent)
    return parents


def _default_home(settings: Settings) -> str | None:
    # An agent as Pacer's own user must not be handed Pacer's HOME (its ~/.ssh, ~/.config):
    # it gets one beside its working directories. A separate user has a home of its own.
    return (
        None if settings.agent_user else os.path.join(os.path.dirname(os.path.abspath(settings.workdir)), "agent-home")
    )


def build_runner(settings: Settings, environ: Mapping[str, str] | None = None, *, engine: Engine | None = None,
                 custody: Custody | None = None) -> Runner:
    """The runner PACER_RUNNER names. `environ` is what a command agent's environment is
    chosen from (custody.AGENT_NAMES and PACER_AGENT_ENV only); it defaults to this process's
    environment. With `engine`, a command agent works in its session's own repository when the
    session names one, and its commits go back as a branch and a draft pull request."""
    if settings.runner == "echo":
        return EchoRunner(settings.echo_seconds, settings.echo_cost_usd)
    runner = CommandRunner(
        settings.runner_command,
        settings.runner_resume_args or "",
        settings.runtime_name,
        settings.turn_timeout_seconds,
        settings.workdir,
        env=os.environ if environ is None else environ,
        custody=custody or build_custody(settings),
        provider_sink=ReadingBook(engine).record if engine is not None else None,
        account=settings.quota_account,
        stall_s=settings.stall_minutes * 60,
    )
    if engine is None:
        return runner
    spaces = build_workspaces(settings)
    clients = github_clients(settings)
    # A GitHub App's installation token for git's fetch and push; else GITHUB_TOKEN (the remote's).
    credentials = clients.token if clients is not None and settings.github_app_id else None
    publish = Publisher(
        spaces,
        PyGithubPulls(clients) if clients is not None else None,
        credentials=credentials,
        people=PyGithubPeople(clients) if clients is not None else None,
    )
    return WorkspaceRunner(runner, spaces, engine, publish=publish, credentials=credentials)


def build_pool(settings: Settings, runner: Runner | None = None, *, engine: Engine | None = None) -> ThreadWorkerPool:
    """PACER_AGENT_WORKERS threads over `runner` (default: build_runner(settings, engine=engine))."""
    return ThreadWorkerPool(runner or build_runner(settings, engine=engine), settings.agent_workers)


def libpq_url(database_url: str) -> str:
    """DATABASE_URL as procrastinate's psycopg pool takes it: a libpq URL, no SQLAlchemy driver."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


def build_dispatcher(settings: Settings) -> TurnQueue | None:
    """With PACER_TURN_QUEUE=procrastinate, the port that defers every started turn for `pacer
    worker` processes; None: each process runs the turns it starts."""
    if settings.turn_queue != "procrastinate" or settings.sqlite:  # SQLite always runs turns in-process
        return None
    # Here, not at the top: procrastinate and psycopg are a sixth of the server's start-up imports,
    # and a server without the queue (SQLite, the default) never uses them.
    from integrations.turn_queue import TurnQueue, build_app

    return TurnQueue(
        build_app(libpq_url(settings.database_url)), stalled_after=timedelta(seconds=settings.turn_lease_seconds)
    )


def build_workspaces(settings: Settings) -> Workspaces:
    """Workspaces under PACER_WORKSPACES, fetched from PACER_GIT_REMOTE; git's fetch and push use
    GITHUB_TOKEN (or, with a GitHub App, the session's installation token), passed to those
    commands alone."""
    return Workspaces(settings.workspaces, GitRemote(settings.git_remote, token=settings.github_token),
                      max_bytes=settings.workspaces_max_mb * 1024 * 1024)


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


def fallback_burn(settings: Settings) -> dict[str, float]:
    """Dollars a minute for runtimes with no turn history yet: the echo agent's configured rate."""
    return fallback_rates(echo_cost_usd=settings.echo_cost_usd, echo_seconds=settings.echo_seconds)


def build_ledger(settings: Settings, engine: Engine) -> LedgerSource:
    return LedgerSource(
        engine,
        capacity_5h_usd=settings.window_5h_usd,
        capacity_7d_usd=settings.window_7d_usd,
        anchor=datetime.fromisoformat(settings.window_anchor),
        fallbacks=fallback_burn(settings),
    )


def quota_source_choice(settings: Settings) -> str:
    """PACER_QUOTA_SOURCE, with auto resolved: the agents print the provider's own figures only
    when they are Claude Code or Codex, run by the command runner."""
    if settings.quota_source != "auto":
        return settings.quota_source
    return "agents" if settings.runner == "command" and settings.runtime_name in AGENT_RUNTIMES else "ledger"


def build_quota_source(settings: Settings, engine: Engine) -> QuotaSource:
    """The source PACER_QUOTA_SOURCE names (auto resolved), wired to `engine`."""
    ledger = build_ledger(settings, engine)
    choice = quota_source_choice(settings)
    if choice == "ledger":
        return ledger
    if choice == "agents":  # the runner's own model picks the per-model weekly bucket that binds it
        model = model_option(shlex.split(settings.runner_command)) if settings.runner == "command" else None
        return AgentsSource(engine, ledger, model=model)
    if settings.pool_url:
        return PoolSource(url=settings.pool_url, spent_since=ledger.spent_since)
    return PoolSource(file=settings.pool_file, spent_since=ledger.spent_since)


def github_clients(settings: Settings) -> GithubClients | None:
    """PyGithub as a GitHub App when one is configured, else with GITHUB_TOKEN; None with neither."""
    key = settings.github_app_key if settings.github_app_id else None
    if settings.github_app_id and key:
        return GithubClients(base_url=settings.github_api_url, app_id=settings.github_app_id, private_key=key,
                             write_seconds=settings.github_write_seconds)
    if settings.github_token:
        return GithubClients(base_url=settings.github_api_url, token=settings.github_token,
                             write_seconds=settings.github_write_seconds)
    return None


def github_comments(settings: Settings) -> PyGithubComments | None:
    """The sticky status comments' port, over `github_clients`; None without credentials."""
    clients = github_clients(settings)
    return PyGithubComments(clients) if clients is not None else None
