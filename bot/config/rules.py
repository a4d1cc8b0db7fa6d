"""The rules a setting's text must follow, each turning it into the value in force or refusing
it with one line that names the variable and what it allows (`templates/errors/settings.j2`).

A rule takes (NAME, raw text); `bot.config.settings` runs it before pydantic's own type check.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from pydantic_core import PydanticCustomError

from scheduler.errors import ConfigError
from templates import error_text

# The error type pydantic carries a refusal under; its context holds the sentence.
REFUSED = "pacer_setting"


def refuse(macro: str, **values: Any) -> PydanticCustomError:
    sentence = error_text(f"settings/{macro}", **values)
    return PydanticCustomError(REFUSED, "{sentence}", {"sentence": sentence})


def as_text(value: Any) -> str:
    """A value as the environment would spell it (`true`, `4`, `0.5`; a parsed list of names as `A,B`)."""
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def secret(name: str, raw: str) -> str:
    # An empty value means unset; whitespace alone is a paste gone wrong, and used as a key it
    # would let anyone sign GitHub deliveries with it or make Slack's verifier fail every request.
    if not raw.strip():
        raise refuse("only_whitespace", name=name)
    return raw


def pem_file(name: str, raw: str) -> str:
    """A private key's file: it must be readable and hold a PEM private key (its text is read when used)."""
    try:
        with open(raw, encoding="utf-8") as handle:
            head = handle.read(4096)
    except (OSError, UnicodeDecodeError) as exc:
        raise refuse("unreadable_file", name=name, raw=raw, reason=getattr(exc, "strerror", None) or exc) from None
    if "PRIVATE KEY-----" not in head:
        raise refuse("not_a_private_key", name=name, raw=raw)
    return raw


def whole(minimum: int, maximum: int | None = None) -> Callable[[str, str], int]:
    def parse(name: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise refuse("whole_number", name=name, raw=raw, minimum=minimum, maximum=maximum) from None
        if value < minimum or (maximum is not None and value > maximum):
            raise refuse("whole_number", name=name, raw=raw, minimum=minimum, maximum=maximum)
        return value

    return parse


def number(minimum: float) -> Callable[[str, str], float]:
    def parse(name: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if value != value or value < minimum:
            raise refuse("number", name=name, raw=raw, minimum=f"{minimum:g}")
        return value

    return parse


def percent(name: str, raw: str) -> float:
    value = number(0.0)(name, raw)
    if value > 100:
        raise refuse("percentage", name=name, raw=raw)
    return value


def boolean(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise refuse("boolean", name=name, raw=raw)


def port(name: str, raw: str) -> int:
    value = whole(1)(name, raw)
    if value > 65535:
        raise refuse("port", name=name, raw=raw)
    return value


def http_url(name: str, raw: str) -> str:
    if not raw.startswith(("http://", "https://")):
        raise refuse("http_url", name=name, raw=raw)
    return raw.rstrip("/") + "/"


def database_url(name: str, raw: str) -> str:
    """Accept Fly's postgres:// form and rewrite it to the psycopg 3 driver."""
    for plain in ("postgres://", "postgresql://"):
        if raw.startswith(plain):
            return "postgresql+psycopg://" + raw[len(plain) :]
    if raw.startswith(("postgresql+psycopg://", "sqlite://", "sqlite+pysqlite://")):
        return raw
    raise refuse("database_url", name=name, scheme=raw.split(":", 1)[0])


def one_of(*allowed: str) -> Callable[[str, str], str]:
    def parse(name: str, raw: str) -> str:
        if raw not in allowed:
            raise refuse("one_of", name=name, raw=raw, allowed=allowed)
        return raw

    return parse


def log_level(name: str, raw: str) -> str:
    if raw.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise refuse("log_level", name=name, raw=raw)
    return raw.upper()


def roster(name: str, raw: str) -> dict[str, str]:
    roster: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        user, sep, role = item.partition("=")
        if not sep or not user.strip() or role.strip() not in {"operator", "member"}:
            raise refuse("roster_entry", name=name, item=item)
        roster[user.strip()] = role.strip()
    return roster


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def names(name: str, raw: str) -> tuple[str, ...]:
    """Comma-separated environment variable names, none of them Pacer's own."""
    found = tuple(filter(None, (part.strip() for part in raw.split(","))))
    for item in found:
        if not _ENV_NAME.match(item):
            raise refuse("env_name", name=name, item=item)
        if item.startswith(("PACER_", "GITHUB_", "SLACK_", "DATABASE_URL")):
            raise refuse("pacers_env_name", name=name, item=item)
    return found


def paths(name: str, raw: str) -> tuple[str, ...]:
    """Comma-separated absolute paths."""
    found = tuple(filter(None, (part.strip() for part in raw.split(","))))
    for item in found:
        if not item.startswith("/"):
            raise refuse("absolute_path", name=name, item=item)
    return found


def instant(name: str, raw: str) -> str:
    try:
        anchor = datetime.fromisoformat(raw)
    except ValueError:
        raise refuse("instant", name=name, raw=raw) from None
    if anchor.tzinfo is None:
        raise refuse("instant_offset", name=name)
    return raw


# A personal API token's shortest length, and the form its SHA-256 may be given in instead.
TOKEN_MIN_CHARS = 16
HASHED_TOKEN = re.compile(r"sha256:([0-9a-f]{64})")


def token_digest(token: str) -> str:
    """What Pacer keeps of an API token: its SHA-256, hex. Tokens are long and random, so an
    unsalted hash is enough to keep the token itself out of memory dumps and `pacer config`."""
    return hashlib.sha256(token.encode()).hexdigest()


def api_tokens(name: str, raw: str) -> dict[str, str]:
    """`alice=<token>,bob=sha256:<hex>` as {holder: SHA-256 of their token}. A refusal names the
    holder and the rule, never the token."""
    secret(name, raw)
    tokens: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        holder, sep, token = (piece.strip() for piece in item.partition("="))
        if not sep or not holder or not token:
            raise refuse("api_token_entry", name=name, holder=holder if sep else None)
        hashed = HASHED_TOKEN.fullmatch(token)
        if hashed is None and len(token) < TOKEN_MIN_CHARS:
            raise refuse("api_token_short", name=name, holder=holder, minimum=TOKEN_MIN_CHARS)
        digest = hashed.group(1) if hashed else token_digest(token)
        if holder in tokens:
            raise refuse("api_token_twice", name=name, holder=holder)
        shared = [other for other, known in tokens.items() if known == digest]
        if shared:
            raise refuse("api_token_shared", name=name, holder=holder, other=shared[0])
        tokens[holder] = digest
    return tokens


def api_token_holders(tokens: Mapping[str, str], roster: Mapping[str, str], shared: str | None) -> None:
    """Every personal token belongs to someone on the roster, and none is the shared token."""
    for holder, digest in tokens.items():
        if holder not in roster:
            raise ConfigError(error_text("settings/api_token_not_rostered", holder=holder))
        if shared is not None and digest == token_digest(shared):
            raise ConfigError(error_text("settings/api_token_is_shared", holder=holder))
