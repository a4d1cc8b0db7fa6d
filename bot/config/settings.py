"""Settings: pydantic-settings fields (declared in `fields.py`), read from an injected mapping
(the environment) over an optional pacer.toml over the defaults.

`load(os.environ)` in production, `load({...})` in tests: the mapping is passed in, never read
from `os.environ` behind the caller's back (starlette's `Config(environ=...)` idea), so the
class's only source is its init arguments and `load` layers them. Every bad value stops start-up
with one line that names the variable and what it allows (`templates/errors/settings.j2`);
`pacer config` shows each value in force, where it came from, secrets as ***.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from pydantic import PrivateAttr, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from bot.config import rules
from bot.config.fields import ENV_NAMES, SettingsFields
from scheduler.errors import ConfigError
from templates import error_text

SECRET_NAMES = frozenset(
    {
        "PACER_API_TOKEN",
        "PACER_API_TOKENS",
        "PACER_METRICS_TOKEN",
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_APP_TOKEN",
        "GITHUB_WEBHOOK_SECRET",
        "GITHUB_TOKEN",
        "GITHUB_APP_PRIVATE_KEY",
    }
)
# Where a value in force came from, as `pacer config` names it.
FROM_ENV, FROM_DEFAULT = "env", "default"


class Settings(SettingsFields):
    """The settings in force: every field `SettingsFields` declares, with where each value came
    from and pacer.toml as read."""

    model_config = SettingsConfigDict(
        case_sensitive=True, frozen=True, extra="forbid", validate_default=True, populate_by_name=False
    )

    _origins: dict[str, str] = PrivateAttr(default_factory=dict)
    _toml: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)  # `load` layers the injected environment over pacer.toml

    @model_validator(mode="after")
    def _pairs(self) -> Settings:
        if self.github_app_id and not (self.github_app_private_key or self.github_app_private_key_file):
            other = "GITHUB_APP_PRIVATE_KEY (or GITHUB_APP_PRIVATE_KEY_FILE)"
            raise rules.refuse("needs_too", name="GITHUB_APP_ID", other=other)
        if self.quota_source == "pool" and not (self.pool_file or self.pool_url):
            raise rules.refuse("pool_without_source")
        return self

    def __repr__(self) -> str:
        return f"Settings({ {row.name: row.value for row in in_force(self)} })"

    __str__ = __repr__

    @property
    def github_app_key(self) -> str | None:
        """The GitHub App's private key: GITHUB_APP_PRIVATE_KEY, else GITHUB_APP_PRIVATE_KEY_FILE's text."""
        if self.github_app_private_key or not self.github_app_private_key_file:
            return self.github_app_private_key
        with open(self.github_app_private_key_file, encoding="utf-8") as handle:
            return handle.read()

    @property
    def effective_slots(self) -> int:
        return min(self.max_sessions, self.agent_workers)

    @property
    def personal_tokens(self) -> Mapping[str, str]:
        """Each person's token as its SHA-256, by holder ({} when PACER_API_TOKENS is unset)."""
        return self.api_tokens or {}

    @property
    def sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def toml(self) -> Mapping[str, Any]:
        """pacer.toml as read (its [settings], [roster] and any other table), {} without one."""
        return self._toml

    def origin(self, name: str) -> str:
        """Where NAME's value in force came from: "env", the pacer.toml path, or "default"."""
        return self._origins.get(name, FROM_DEFAULT)

    def replaced(self, **by_name: str) -> Settings:
        """These settings with some variables set anew (by NAME), validated like the rest."""
        raw = {name: value for name, value in _raw_values(self).items() if name not in by_name}
        fresh = _validated({**raw, **by_name})
        fresh._origins = {**self._origins, **dict.fromkeys(by_name, FROM_ENV)}
        fresh._toml = self._toml
        return fresh


_ATTRS: dict[str, str] = {name: attr for attr, name in ENV_NAMES.items()}


class Variable(NamedTuple):
    name: str
    default: str | None
    meaning: str


VARIABLES: tuple[Variable, ...] = tuple(
    Variable(str(info.alias), info.default, str(info.description)) for info in Settings.model_fields.values()
)


def _validated(raw: Mapping[str, Any]) -> Settings:
    try:
        return Settings(**raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == rules.REFUSED:
            raise ConfigError(str(first.get("ctx", {}).get("sentence", first["msg"]))) from None
        name = ENV_NAMES.get(str(first["loc"][0]), str(first["loc"][0])) if first["loc"] else "settings"
        raise ConfigError(
            error_text("settings/not_a_value", name=name, raw=rules.as_text(first.get("input")))
        ) from None


def _read_toml(environ: Mapping[str, str], toml_path: str | Path | None) -> tuple[Path, dict[str, Any]]:
    path = Path(toml_path or environ.get("PACER_CONFIG", "pacer.toml"))
    if path.is_file():
        try:
            return path, tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(error_text("settings/not_toml", path=path, detail=exc)) from None
    if toml_path is not None or "PACER_CONFIG" in environ:
        raise ConfigError(error_text("settings/no_config_file", path=str(path)))
    return path, {}


def load(environ: Mapping[str, str], *, toml_path: str | Path | None = None) -> Settings:
    """Read and validate every variable: `environ` over pacer.toml's [settings] over the defaults.
    A bad value raises ConfigError naming it."""
    path, toml_data = _read_toml(environ, toml_path)
    from_file = {str(k).upper(): v for k, v in toml_data.get("settings", {}).items()}
    unknown = sorted(set(from_file) - set(_ATTRS))
    if unknown:
        raise ConfigError(error_text("settings/unknown_setting", path=path, name=unknown[0]))
    raw: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for var in VARIABLES:
        for source, layer in ((FROM_ENV, environ), (str(path), from_file)):
            value = layer.get(var.name)
            # An empty value means unset: the default, which for a secret is "none".
            if value is not None and not (value == "" and var.default is None):
                raw[var.name], origins[var.name] = value, source
                break
    settings = _validated(raw)
    roster = dict(settings.roster)
    for user, role in dict(toml_data.get("roster", {})).items():
        if role not in {"operator", "member"}:
            raise ConfigError(error_text("settings/toml_roster_role", path=path, user=user, role=role))
        roster.setdefault(str(user), str(role))
    if roster != settings.roster:
        origins["PACER_ROSTER"] = f"{origins['PACER_ROSTER']} + {path}" if "PACER_ROSTER" in origins else str(path)
        settings = settings.model_copy(update={"roster": roster})
    rules.api_token_holders(settings.personal_tokens, settings.roster, settings.api_token)
    settings._origins, settings._toml = origins, toml_data
    return settings


def _raw_values(settings: Settings) -> dict[str, Any]:
    """The values in force as init arguments (by NAME), for `Settings.replaced`."""
    out: dict[str, Any] = {}
    for attr, name in ENV_NAMES.items():
        value = getattr(settings, attr)
        if value is None:
            continue
        if name == "PACER_ROSTER":
            out[name] = ",".join(f"{u}={r}" for u, r in value.items())
        elif name == "PACER_API_TOKENS":
            out[name] = ",".join(f"{holder}=sha256:{digest}" for holder, digest in value.items())
        else:
            out[name] = rules.as_text(value)
    return out


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
    origin: str


def in_force(settings: Settings) -> list[Shown]:
    """Every variable with the value in force, as a person may read it: secrets as ***, a URL's
    password hidden, the roster merged from PACER_ROSTER and pacer.toml's [roster]."""
    return [
        Shown(var.name, _shown_value(var.name, settings), var.default or "", var.meaning, settings.origin(var.name))
        for var in VARIABLES
    ]


def _shown_value(name: str, settings: Settings) -> str:
    if name == "PACER_ROSTER":
        return ",".join(f"{user}={role}" for user, role in sorted(settings.roster.items())) or "(empty)"
    if name == "PACER_API_TOKENS" and settings.api_tokens is not None:  # who holds one, never a token or its hash
        return ",".join(f"{holder}=***" for holder in sorted(settings.api_tokens))
    value = getattr(settings, _ATTRS[name])
    if value is None:
        return "(unset)"
    if name in SECRET_NAMES:
        return "***"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, tuple):
        return rules.as_text(value) or "(none)"
    return redact_url(str(value))


def documented() -> list[tuple[str, str, str]]:
    """(name, default, meaning) rows, for the README table and `pacer config`."""
    return [(v.name, v.default or "", v.meaning) for v in VARIABLES]


__all__ = ["Settings", "load", "documented", "in_force", "redact_url", "VARIABLES", "SECRET_NAMES"]
