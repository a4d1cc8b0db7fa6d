"""Settings, read once from an injected mapping (the environment) plus an optional pacer.toml.

Every bad value stops start-up with one line that names the variable and the rule it broke.
Secrets are redacted from the repr so a logged Settings never leaks a token.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from scheduler.bounds import MAX_SESSIONS
from scheduler.errors import ConfigError

SECRET_NAMES = frozenset(
    {
        "PACER_API_TOKEN",
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_APP_TOKEN",
        "GITHUB_WEBHOOK_SECRET",
        "GITHUB_TOKEN",
        "GITHUB_APP_PRIVATE_KEY",
    }
)


@dataclass(frozen=True)
class Variable:
    name: str
    default: str | None
    meaning: str
    parse: Callable[[str, str], Any]


def _str(name: str, raw: str) -> str:
    return raw


def _secret(name: str, raw: str) -> str:
    # An empty value means unset; whitespace alone is a paste gone wrong, and used as a key it
    # would let anyone sign GitHub deliveries with it or make Slack's verifier fail every request.
    if not raw.strip():
        raise ConfigError(f"{name}: is only whitespace; set the real secret, or leave {name} unset")
    return raw


def _int_at_least(minimum: int, maximum: int | None = None) -> Callable[[str, str], int]:
    rule = f"a whole number >= {minimum}" if maximum is None else f"a whole number from {minimum} to {maximum}"

    def parse(name: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r}: must be {rule}") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise ConfigError(f"{name}={raw!r}: must be {rule}")
        return value

    return parse


def _float_at_least(minimum: float) -> Callable[[str, str], float]:
    def parse(name: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r}: must be a number >= {minimum:g}") from None
        if value != value or value < minimum:
            raise ConfigError(f"{name}={raw!r}: must be a number >= {minimum:g}")
        return value

    return parse


def _percent(name: str, raw: str) -> float:
    value = _float_at_least(0.0)(name, raw)
    if value > 100:
        raise ConfigError(f"{name}={raw!r}: must be a percentage between 0 and 100")
    return value


def _bool(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name}={raw!r}: must be one of true/false, yes/no, on/off, 1/0")


def _port(name: str, raw: str) -> int:
    value = _int_at_least(1)(name, raw)
    if value > 65535:
        raise ConfigError(f"{name}={raw!r}: must be a TCP port between 1 and 65535")
    return value


def _url(name: str, raw: str) -> str:
    if not raw.startswith(("http://", "https://")):
        raise ConfigError(f"{name}={raw!r}: must be an http:// or https:// URL")
    return raw.rstrip("/") + "/"


def _database_url(name: str, raw: str) -> str:
    """Accept Fly's postgres:// form and rewrite it to the psycopg 3 driver."""
    if raw.startswith("postgres://"):
        return "postgresql+psycopg://" + raw[len("postgres://") :]
    if raw.startswith("postgresql://"):
        return "postgresql+psycopg://" + raw[len("postgresql://") :]
    if raw.startswith(("postgresql+psycopg://", "sqlite://", "sqlite+pysqlite://")):
        return raw
    raise ConfigError(
        f"{name}: must start with sqlite:///, postgres:// or postgresql:// (got a {raw.split(':', 1)[0]!r} URL)"
    )


def _runner(name: str, raw: str) -> str:
    if raw not in {"echo", "command"}:
        raise ConfigError(f"{name}={raw!r}: must be 'echo' or 'command'")
    return raw


def _quota_source(name: str, raw: str) -> str:
    if raw not in {"ledger", "pool"}:
        raise ConfigError(f"{name}={raw!r}: must be 'ledger' or 'pool'")
    return raw


def _roster(name: str, raw: str) -> dict[str, str]:
    roster: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        user, sep, role = item.partition("=")
        if not sep or not user.strip() or role.strip() not in {"operator", "member"}:
            raise ConfigError(
                f"{name}: entry {item!r} must be USER=operator or USER=member, comma-separated"
            )
        roster[user.strip()] = role.strip()
    return roster


def _log_format(name: str, raw: str) -> str:
    if raw not in {"text", "json"}:
        raise ConfigError(f"{name}={raw!r}: must be 'text' or 'json'")
    return raw


def _log_level(name: str, raw: str) -> str:
    upper = raw.upper()
    if upper not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise ConfigError(f"{name}={raw!r}: must be DEBUG, INFO, WARNING or ERROR")
    return upper


VARIABLES: tuple[Variable, ...] = (
    Variable("DATABASE_URL", "sqlite:///./var/pacer.db", "Database URL: SQLite file or PostgreSQL (postgres:// is rewritten for psycopg)", _database_url),
    Variable("PACER_HOST", "127.0.0.1", "Address the HTTP server binds", _str),
    Variable("PACER_PORT", "8080", "Port the HTTP server binds", _port),
    Variable("PACER_API_TOKEN", None, "Bearer token for /api/v1 (unset: the API answers 401 to everyone)", _secret),
    Variable("PACER_LOG_LEVEL", "INFO", "Log level (APScheduler and HTTP clients log at WARNING unless this is DEBUG)", _log_level),
    Variable("PACER_LOG_FORMAT", "text", "Log format: text, or json (one object a line: time, level, logger, message)", _log_format),
    Variable("PACER_ACCESS_LOG", "false", "Log every HTTP request (uvicorn's access log); off by default, it costs CPU under a burst", _bool),
    Variable("PACER_MAX_SESSIONS", "10", "Max sessions at once (slots); priority never waits on it", _int_at_least(1, MAX_SESSIONS)),
    Variable("PACER_AGENT_WORKERS", "12", "Worker threads executing turns; the effective slot ceiling is min(max sessions, workers)", _int_at_least(1)),
    Variable("PACER_GATING", "true", "Spot gating on/off (initial policy; later changes are audited in the database)", _bool),
    Variable("PACER_RESERVE_5H_PCT", "20", "Priority reserve of the 5-hour window, percent", _percent),
    Variable("PACER_RESERVE_7D_PCT", "20", "Priority reserve of the 7-day window, percent", _percent),
    Variable("PACER_PREEMPTION", "true", "Let a priority start take a slot from a running spot session", _bool),
    Variable("PACER_WINDOW_5H_USD", "50", "Ledger quota: dollars a 5-hour window is worth", _float_at_least(0.01)),
    Variable("PACER_WINDOW_7D_USD", "600", "Ledger quota: dollars a 7-day window is worth", _float_at_least(0.01)),
    Variable("PACER_WINDOW_ANCHOR", "2026-01-05T00:00:00+00:00", "Ledger quota: an instant at which both windows reset (ISO-8601)", _str),
    Variable("PACER_QUOTA_SOURCE", "ledger", "Where window readings come from: ledger (own turn costs) or pool (account readings)", _quota_source),
    Variable("PACER_POOL_FILE", None, "Pool quota source: JSON file of per-account readings", _str),
    Variable("PACER_POOL_URL", None, "Pool quota source: HTTP endpoint returning the same JSON", _str),
    Variable("PACER_RUNNER", "echo", "Turn runner: echo (built-in, no account) or command (a CLI agent)", _runner),
    Variable("PACER_RUNNER_COMMAND", "claude -p {prompt} --output-format json", "Command template for the command runner", _str),
    Variable("PACER_RUNNER_RESUME_ARGS", "--resume {agent_session_id}", "Arguments appended on later turns of a session", _str),
    Variable("PACER_RUNTIME_NAME", "claude_code", "Name of the command runner's runtime", _str),
    Variable("PACER_RUNTIME_SPENDS_QUOTA", "true", "Whether the command runtime spends quota (takes a slot)", _bool),
    Variable("PACER_TURN_TIMEOUT_SECONDS", "3600", "Longest a command-runner turn may run before it is killed", _int_at_least(1)),
    Variable("PACER_WORKDIR", "./var/work", "Per-session working directories live under here", _str),
    Variable("PACER_ECHO_SECONDS", "2", "Echo agent: seconds a turn takes", _float_at_least(0.0)),
    Variable("PACER_ECHO_COST_USD", "0.05", "Echo agent: dollars a turn reports", _float_at_least(0.0)),
    Variable("PACER_ROSTER", "", "Who may steer Pacer: U012AB=operator,U034CD=member (also [roster] in pacer.toml)", _roster),
    Variable("PACER_CONSOLE_USER", "console", "The roster user the console speaks as", _str),
    Variable("PACER_OPS_CHANNEL", None, "Slack channel where queue holds announce themselves", _str),
    Variable("PACER_MAX_BODY_BYTES", "1048576", "Largest HTTP request body accepted", _int_at_least(1024)),
    Variable("PACER_MAX_PROMPT_CHARS", "100000", "Longest prompt accepted", _int_at_least(1)),
    Variable("PACER_TRIGGERS_FILE", None, "triggers.toml loaded at start (triggers as code)", _str),
    Variable("SLACK_BOT_TOKEN", None, "Slack bot token (xoxb-…)", _secret),
    Variable("SLACK_SIGNING_SECRET", None, "Slack signing secret, verifies every request", _secret),
    Variable("SLACK_APP_TOKEN", None, "Slack app-level token (xapp-…): enables Socket Mode", _secret),
    Variable("SLACK_API_URL", "https://slack.com/api/", "Base URL of Slack's Web API (point at a local mock in tests)", _url),
    Variable("GITHUB_WEBHOOK_SECRET", None, "Secret GitHub signs webhook deliveries with", _secret),
    Variable("GITHUB_TOKEN", None, "GitHub token for status comments (or use a GitHub App)", _secret),
    Variable("GITHUB_APP_ID", None, "GitHub App id (with GITHUB_APP_PRIVATE_KEY)", _str),
    Variable("GITHUB_APP_PRIVATE_KEY", None, "GitHub App private key, PEM", _secret),
    Variable("GITHUB_API_URL", "https://api.github.com/", "Base URL of GitHub's REST API", _url),
    Variable("GITHUB_BOT_LOGIN", "pacer[bot]", "Pacer's own GitHub login; its events are ignored", _str),
)

_BY_NAME = {v.name: v for v in VARIABLES}


def _attr(name: str) -> str:
    return name.lower().removeprefix("pacer_")


@dataclass(frozen=True)
class Settings:
    values: Mapping[str, Any]
    roster: Mapping[str, str] = field(default_factory=dict)
    toml: Mapping[str, Any] = field(default_factory=dict)

    def __getattr__(self, item: str) -> Any:
        for name, value in self.values.items():
            if _attr(name) == item:
                return value
        raise AttributeError(item)

    def __repr__(self) -> str:
        return f"Settings({ {row.name: row.value for row in in_force(self)} })"

    @property
    def effective_slots(self) -> int:
        return min(self.max_sessions, self.agent_workers)

    @property
    def sqlite(self) -> bool:
        return str(self.database_url).startswith("sqlite")


def load(environ: Mapping[str, str], *, toml_path: str | Path | None = None) -> Settings:
    """Read and validate every variable. A bad value raises ConfigError naming it."""
    toml_data: dict[str, Any] = {}
    path = Path(toml_path or environ.get("PACER_CONFIG", "pacer.toml"))
    if path.is_file():
        try:
            toml_data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    elif toml_path is not None or "PACER_CONFIG" in environ:
        raise ConfigError(f"PACER_CONFIG={str(path)!r}: file does not exist")
    from_file = {str(k).upper(): v for k, v in toml_data.get("settings", {}).items()}
    unknown = sorted(set(from_file) - set(_BY_NAME))
    if unknown:
        raise ConfigError(f"{path} [settings]: unknown setting {unknown[0]!r}")

    values: dict[str, Any] = {}
    for var in VARIABLES:
        raw = environ.get(var.name)
        if raw is None and var.name in from_file:
            raw = str(from_file[var.name]).lower() if isinstance(from_file[var.name], bool) else str(from_file[var.name])
        if raw is None or (raw == "" and var.default is None):
            raw = var.default
        values[var.name] = None if raw is None else var.parse(var.name, raw)

    roster = dict(values["PACER_ROSTER"])
    for user, role in dict(toml_data.get("roster", {})).items():
        if role not in {"operator", "member"}:
            raise ConfigError(f"{path} [roster]: {user} = {role!r} must be 'operator' or 'member'")
        roster.setdefault(str(user), str(role))
    if values["GITHUB_APP_ID"] and not values["GITHUB_APP_PRIVATE_KEY"]:
        raise ConfigError("GITHUB_APP_ID is set: GITHUB_APP_PRIVATE_KEY must be set too")
    if values["PACER_QUOTA_SOURCE"] == "pool" and not (values["PACER_POOL_FILE"] or values["PACER_POOL_URL"]):
        raise ConfigError("PACER_QUOTA_SOURCE=pool: set PACER_POOL_FILE or PACER_POOL_URL")
    from datetime import datetime

    try:
        anchor = datetime.fromisoformat(values["PACER_WINDOW_ANCHOR"])
    except ValueError:
        raise ConfigError(f"PACER_WINDOW_ANCHOR={values['PACER_WINDOW_ANCHOR']!r}: must be an ISO-8601 instant") from None
    if anchor.tzinfo is None:
        raise ConfigError("PACER_WINDOW_ANCHOR: must carry a UTC offset, e.g. 2026-01-05T00:00:00+00:00")
    return Settings(values=values, roster=roster, toml=toml_data)


def redact_url(value: str) -> str:
    """The URL with its password, if any, shown as ***: `scheme://user:***@host/...`."""
    try:
        parts = urlsplit(value)
        has_password = parts.password is not None
    except ValueError:
        return value
    if not has_password:
        return value
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


class Shown(NamedTuple):
    name: str
    value: str
    default: str
    meaning: str


def in_force(settings: Settings) -> list[Shown]:
    """Every variable with the value in force, as a person may read it: secrets as ***, a URL's
    password hidden, the roster merged from PACER_ROSTER and pacer.toml's [roster]."""
    return [Shown(var.name, _shown_value(var.name, settings), var.default or "", var.meaning) for var in VARIABLES]


def _shown_value(name: str, settings: Settings) -> str:
    if name == "PACER_ROSTER":
        return ",".join(f"{user}={role}" for user, role in sorted(settings.roster.items())) or "(empty)"
    value = settings.values.get(name)
    if value is None:
        return "(unset)"
    if name in SECRET_NAMES:
        return "***"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return redact_url(str(value))


def documented() -> list[tuple[str, str, str]]:
    """(name, default, meaning) rows, for the README table and `pacer config`."""
    return [(v.name, v.default or "", v.meaning) for v in VARIABLES]


__all__ = ["Settings", "load", "documented", "in_force", "redact_url", "VARIABLES"]
