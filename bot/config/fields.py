"""Every setting as a field: its variable, its default (the text a person would write), what it
means, and the rule its value follows (`bot.config.rules`), checked before pydantic's own type
check. `settings.Settings` reads them in; the order here is the order `pacer config` and the
README show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationInfo
from pydantic_settings import BaseSettings

from bot.config import rules
from scheduler.bounds import MAX_SESSIONS


def _rule(check: Callable[[str, str], Any]) -> BeforeValidator:
    """Run `check(NAME, raw text)` before pydantic's own type check; None (unset) passes through."""

    def run(value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        return check(ENV_NAMES[str(info.field_name)], rules.as_text(value))

    return BeforeValidator(run)


Text = Annotated[str, _rule(lambda name, raw: raw)]
Secret = Annotated[str | None, _rule(rules.secret)]
Flag = Annotated[bool, _rule(rules.boolean)]
Url = Annotated[str, _rule(rules.http_url)]
Count = Annotated[int, _rule(rules.whole(1))]
Dollars = Annotated[float, _rule(rules.number(0.01))]
Amount = Annotated[float, _rule(rules.number(0.0))]
Percent = Annotated[float, _rule(rules.percent)]


def _field(name: str, default: str | None, meaning: str) -> Any:
    # Defaults are the text a person would write, validated like any other value, so the
    # default `pacer config` prints and the value in force are one string.
    return Field(default, alias=name, description=meaning)


class SettingsFields(BaseSettings):
    """Every setting, by its environment variable; the attribute drops a leading `PACER_`."""

    database_url: Annotated[str, _rule(rules.database_url)] = _field(
        "DATABASE_URL",
        "sqlite:///./var/pacer.db",
        "Database URL: SQLite file or PostgreSQL (postgres:// is rewritten for psycopg)",
    )
    host: Text = _field("PACER_HOST", "127.0.0.1", "Address the HTTP server binds")
    port: Annotated[int, _rule(rules.port)] = _field("PACER_PORT", "8080", "Port the HTTP server binds")
    worker_port: Annotated[int | None, _rule(rules.port)] = _field(
        "PACER_WORKER_PORT", None, "Port `pacer worker` answers GET /healthz on, at PACER_HOST (unset: none)"
    )
    api_token: Secret = _field(
        "PACER_API_TOKEN",
        None,
        "Shared bearer token for /api/v1 and the live page: automation, audited as 'api token' "
        "(unset, and no PACER_API_TOKENS: 401)",
    )
    api_tokens: Annotated[dict[str, str] | None, _rule(rules.api_tokens)] = _field(
        "PACER_API_TOKENS",
        None,
        "Personal API tokens, alice=<token>,bob=sha256:<hex>: "
        "each acts as its rostered holder whatever X-Pacer-Actor says",
    )
    api_role: Annotated[str, _rule(rules.one_of("member", "operator"))] = _field(
        "PACER_API_ROLE",
        "member",
        "The role the shared PACER_API_TOKEN acts with: "
        "member, or operator for automation that changes policy and triggers",
    )
    metrics_token: Secret = _field(
        "PACER_METRICS_TOKEN",
        None,
        "Bearer token GET /metrics asks for (unset: /metrics is open, as most exporters are)",
    )
    log_level: Annotated[str, _rule(rules.log_level)] = _field(
        "PACER_LOG_LEVEL", "INFO", "Log level (APScheduler and HTTP clients log at WARNING unless this is DEBUG)"
    )
    log_format: Annotated[str, _rule(rules.one_of("text", "json"))] = _field(
        "PACER_LOG_FORMAT", "text",
        "Log format: text, or json (one object a line: time, level, logger, message, and the ids, event, reason, "
        "class and genesis it knows)",
    )
    access_log: Flag = _field(
        "PACER_ACCESS_LOG",
        "false",
        "Log every HTTP request (uvicorn's access log); off by default, it costs CPU under a burst",
    )
    max_sessions: Annotated[int, _rule(rules.whole(1, MAX_SESSIONS))] = _field(
        "PACER_MAX_SESSIONS", "10", "Max sessions at once (slots); priority never waits on it"
    )
    agent_workers: Count = _field(
        "PACER_AGENT_WORKERS",
        "12",
        "Worker threads executing turns; the effective slot ceiling is min(max sessions, workers)",
    )
    gating: Flag = _field(
        "PACER_GATING", "true", "Spot gating on/off (initial policy; later changes are audited in the database)"
    )
    reserve_5h_pct: Percent = _field("PACER_RESERVE_5H_PCT", "20", "Priority reserve of the 5-hour window, percent")
    reserve_7d_pct: Percent = _field("PACER_RESERVE_7D_PCT", "20", "Priority reserve of the 7-day window, percent")
    preemption: Flag = _field(
        "PACER_PREEMPTION", "true", "Let a priority start take a slot from a running spot session"
    )
    notice_minutes: Amount = _field(
        "PACER_NOTICE_MINUTES",
        "30",
        "Warn running spot sessions when a window's spot budget runs out "
        "within this many minutes at the present burn (0: never)",
    )
    window_5h_usd: Dollars = _field("PACER_WINDOW_5H_USD", "50", "Ledger quota: dollars a 5-hour window is worth")
    window_7d_usd: Dollars = _field("PACER_WINDOW_7D_USD", "600", "Ledger quota: dollars a 7-day window is worth")
    window_anchor: Annotated[str, _rule(rules.instant)] = _field(
        "PACER_WINDOW_ANCHOR",
        "2026-01-05T00:00:00+00:00",
        "Ledger quota: an instant at which both windows reset (ISO-8601)",
    )
    quota_source: Annotated[str, _rule(rules.one_of("auto", "agents", "pool", "ledger"))] = _field(
        "PACER_QUOTA_SOURCE",
        "auto",
        "Where window readings come from: agents (the provider's figures the agents print), pool (account readings) "
        "or ledger (own turn costs); auto: agents for a Claude Code or Codex command runner, else ledger",
    )
    quota_account: Text = _field(
        "PACER_QUOTA_ACCOUNT",
        "default",
        "Agents quota: the account this deployment's agents spend (readings are kept per account)",
    )
    pool_file: Text | None = _field("PACER_POOL_FILE", None, "Pool quota source: JSON file of per-account readings")
    pool_url: Text | None = _field("PACER_POOL_URL", None, "Pool quota source: HTTP endpoint returning the same JSON")
    runner: Annotated[str, _rule(rules.one_of("echo", "command"))] = _field(
        "PACER_RUNNER", "echo", "Turn runner: echo (built-in, no account) or command (a CLI agent)"
    )
    runner_command: Text = _field(
        "PACER_RUNNER_COMMAND", "claude -p --output-format stream-json --verbose",
        "Command template for the command runner (no {prompt}: the prompt goes on stdin)",
    )
    runner_resume_args: Text = _field(
        "PACER_RUNNER_RESUME_ARGS", "--resume {agent_session_id}", "Arguments appended on later turns of a session"
    )
    runtime_name: Text = _field("PACER_RUNTIME_NAME", "claude_code", "Name of the command runner's runtime")
    runtime_spends_quota: Flag = _field(
        "PACER_RUNTIME_SPENDS_QUOTA", "true", "Whether the command runtime spends quota (takes a slot)"
    )
    turn_timeout_seconds: Count = _field(
        "PACER_TURN_TIMEOUT_SECONDS", "3600", "Longest a command-runner turn may run before it is killed"
    )
    stall_minutes: Amount = _field(
        "PACER_STALL_MINUTES",
        "10",
        "Minutes a command-runner agent may print nothing at all before its turn is halted as stalled "
        "and retried by the failure policy (0: never)",
    )
    turn_lease_seconds: Annotated[float, _rule(rules.number(1.0))] = _field(
        "PACER_TURN_LEASE_SECONDS",
        "30",
        "A running turn's lease: its process renews it every third; "
        "a turn not renewed this long is recovered elsewhere",
    )
    turn_queue: Annotated[str, _rule(rules.one_of("local", "procrastinate"))] = _field(
        "PACER_TURN_QUEUE",
        "local",
        "Where turns run: local (the deciding process's pool) "
        "or procrastinate (`pacer worker` processes; PostgreSQL only)",
    )
    drain_seconds: Amount = _field(
        "PACER_DRAIN_SECONDS",
        "30",
        "On SIGTERM, how long running turns may finish before they are handed to the next leader "
        "(keep under Fly's kill_timeout)",
    )
    workdir: Text = _field("PACER_WORKDIR", "./var/work", "Per-session working directories live under here")
    workspaces: Text = _field(
        "PACER_WORKSPACES",
        "./var/workspaces",
        "Git workspaces: a mirror per repository (Pacer's), a clone per session that names one (its agent's)",
    )
    git_remote: Text = _field(
        "PACER_GIT_REMOTE",
        "https://github.com/{repository}.git",
        "Where a session's repository is fetched from and pushed to ({repository} is owner/name)",
    )
    workspace_ttl: Count = _field(
        "PACER_WORKSPACE_TTL", "72", "Hours a finished session's worktree is kept before it is removed"
    )
    workspaces_max_mb: Count = _field(
        "PACER_WORKSPACES_MAX_MB",
        "20480",
        "Disk all workspaces may use; past it the hourly sweep removes finished sessions' worktrees, oldest first",
    )
    agent_user: Text | None = _field(
        "PACER_AGENT_USER",
        None,
        "Run agents as this unprivileged user (Pacer must run as root; the image has pacer-agent)",
    )
    agent_sandbox: Annotated[str, _rule(rules.one_of("auto", "bwrap", "off"))] = _field(
        "PACER_AGENT_SANDBOX",
        "auto",
        "Run agents in a bubblewrap sandbox: auto (when bwrap works here), bwrap (required) or off",
    )
    agent_home: Text | None = _field(
        "PACER_AGENT_HOME",
        None,
        "The agents' HOME, where their CLI keeps its login "
        "(default: PACER_AGENT_USER's home, else agent-home beside PACER_WORKDIR)",
    )
    agent_env: Annotated[tuple[str, ...], _rule(rules.names)] = _field(
        "PACER_AGENT_ENV",
        "",
        "More environment variables agents get, comma-separated (never PACER_*, GITHUB_*, SLACK_*, DATABASE_URL)",
    )
    agent_bind: Annotated[tuple[str, ...], _rule(rules.paths)] = _field(
        "PACER_AGENT_BIND",
        "",
        "More paths the sandbox shows agents read-only, comma-separated (an agent installed outside /usr and /opt)",
    )
    echo_seconds: Amount = _field("PACER_ECHO_SECONDS", "2", "Echo agent: seconds a turn takes")
    echo_cost_usd: Amount = _field("PACER_ECHO_COST_USD", "0.05", "Echo agent: dollars a turn reports")
    roster: Annotated[dict[str, str], _rule(rules.roster)] = _field(
        "PACER_ROSTER", "", "Who may steer Pacer: U012AB=operator,U034CD=member (also [roster] in pacer.toml)"
    )
    console_user: Text = _field(
        "PACER_CONSOLE_USER",
        "console",
        "The roster user the console speaks as (through a leading server, it is the shared token's 'api token')",
    )
    ops_channel: Text | None = _field("PACER_OPS_CHANNEL", None, "Slack channel where queue holds announce themselves")
    max_body_bytes: Annotated[int, _rule(rules.whole(1024))] = _field(
        "PACER_MAX_BODY_BYTES", "1048576", "Largest HTTP request body accepted"
    )
    header_timeout_seconds: Count = _field(
        "PACER_HEADER_TIMEOUT_SECONDS",
        "10",
        "Longest a client may take to send a request's headers (from connecting, or the last answer); then 408, closed",
    )
    body_timeout_seconds: Count = _field(
        "PACER_BODY_TIMEOUT_SECONDS",
        "10",
        "Longest a request body may stall between two chunks; past it the client gets 408 and the connection closes",
    )
    body_min_rate: Count = _field(
        "PACER_BODY_MIN_RATE",
        "1024",
        "Slowest a request body may arrive, bytes a second, once its first PACER_BODY_TIMEOUT_SECONDS are spent; "
        "slower is a 408",
    )
    max_connections: Annotated[int, _rule(rules.whole(2, 100000))] = _field(
        "PACER_MAX_CONNECTIONS",
        "200",
        "Connections and requests at once; a request past it is answered 503 (uvicorn's limit_concurrency)",
    )
    keep_alive_seconds: Count = _field(
        "PACER_KEEP_ALIVE_SECONDS", "5", "How long an idle connection stays open after an answer"
    )
    live_cookie_hours: Count = _field(
        "PACER_LIVE_COOKIE_HOURS",
        "12",
        "How long the live page's sign-in cookie lasts; then the token is asked for again",
    )
    max_prompt_chars: Count = _field("PACER_MAX_PROMPT_CHARS", "100000", "Longest prompt accepted")
    triggers_file: Text | None = _field("PACER_TRIGGERS_FILE", None, "triggers.toml loaded at start (triggers as code)")
    slack_bot_token: Secret = _field("SLACK_BOT_TOKEN", None, "Slack bot token (xoxb-…)")
    slack_signing_secret: Secret = _field(
        "SLACK_SIGNING_SECRET", None, "Slack signing secret, verifies every request (HTTP mode; Socket Mode needs none)"
    )
    slack_app_token: Secret = _field("SLACK_APP_TOKEN", None, "Slack app-level token (xapp-…): enables Socket Mode")
    slack_api_url: Url = _field(
        "SLACK_API_URL", "https://slack.com/api/", "Base URL of Slack's Web API (point at a local mock in tests)"
    )
    github_webhook_secret: Secret = _field("GITHUB_WEBHOOK_SECRET", None, "Secret GitHub signs webhook deliveries with")
    github_token: Secret = _field("GITHUB_TOKEN", None, "GitHub token for status comments (or use a GitHub App)")
    github_app_id: Text | None = _field("GITHUB_APP_ID", None, "GitHub App id (with GITHUB_APP_PRIVATE_KEY)")
    github_app_private_key: Secret = _field("GITHUB_APP_PRIVATE_KEY", None, "GitHub App private key, PEM")
    github_app_private_key_file: Annotated[str | None, _rule(rules.pem_file)] = _field(
        "GITHUB_APP_PRIVATE_KEY_FILE",
        None,
        "File holding the GitHub App's private key, PEM (instead of GITHUB_APP_PRIVATE_KEY)",
    )
    github_api_url: Url = _field("GITHUB_API_URL", "https://api.github.com/", "Base URL of GitHub's REST API")
    github_write_seconds: Amount = _field(
        "PACER_GITHUB_WRITE_SECONDS",
        "1",
        "Least seconds between two of Pacer's writes to GitHub's API (GitHub asks 1; 0 only for a local stand-in)",
    )
    github_bot_login: Text = _field(
        "GITHUB_BOT_LOGIN",
        "pacer[bot]",
        "Pacer's own GitHub login; its events are ignored (with GITHUB_TOKEN: the token's user)",
    )
    fix_budget: Annotated[int, _rule(rules.whole(0, 100))] = _field(
        "PACER_FIX_BUDGET",
        "3",
        "Turns a session may spend fixing failed checks on its pull request; then it stops and says so there (0: none)",
    )


ENV_NAMES: dict[str, str] = {attr: str(info.alias) for attr, info in SettingsFields.model_fields.items()}
