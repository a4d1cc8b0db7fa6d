"""Triggers as code: `triggers.toml` (PACER_TRIGGERS_FILE), loaded at start, so a team keeps its
triggers in git.

    [[trigger]]
    name = "issue-intake"
    kind = "github_issue"
    scheduling_class = "spot"        # priority | spot | default
    precedence = 10                   # a whole number; never top_of_spot
    prompt_template = "Fix {{ title }}: {{ url }}"
    [trigger.config]
    repositories = ["acme/api"]

Each entry is upserted by name: created, or brought in line (a class change moves that
trigger's waiting sessions and releases the promoted ones, as over the API). Triggers absent
from the file are left alone — the API and Slack may own them. The file is strict: an unknown
key is an error, and a bad file stops start-up with a ConfigError naming the file, the line,
the trigger, the key and the rule, before anything is written.
"""

from __future__ import annotations

import logging
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.triggers import writes as store
from bot.triggers.spec import SPEC_FIELDS, TriggerSpec, check_spec
from scheduler.errors import ConfigError, InvalidInput, Refused
from scheduler.front import Context, session_scope
from templates import error_text

log = logging.getLogger("pacer.triggers_file")

TABLE = "trigger"
_HEADER = re.compile(r"^\s*\[\[\s*trigger\s*\]\]\s*(#.*)?$")


@dataclass
class Loaded:
    path: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    reclassified: dict[str, int] = field(default_factory=dict)  # name -> sessions moved


def _blocks(text: str) -> list[int]:
    """The 1-based line of each `[[trigger]]` header, in order."""
    return [n for n, line in enumerate(text.splitlines(), start=1) if _HEADER.match(line)]


def _line_of(text: str, start: int | None, key: str | None) -> int | None:
    """Where `key` (its last dotted part) is set inside the block whose header is line `start`;
    the header itself when it is not found there."""
    if start is None or not key:
        return start
    pattern = re.compile(rf"^\s*\"?{re.escape(key.split('.')[-1])}\"?\s*=")
    lines = text.splitlines()
    for index in range(start, len(lines)):  # `start` is 1-based: this is the line after it
        if _HEADER.match(lines[index]):
            break
        if pattern.match(lines[index]):
            return index + 1
    return start


def _where(path: Path, line: int | None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


def parse(path: Path) -> list[TriggerSpec]:
    """Read and validate the whole file; nothing is written here."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(error_text("triggers_file/unreadable", path=path, reason=exc.strerror or exc)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(error_text("triggers_file/not_toml", path=path, problem=exc)) from None
    unknown = [k for k in data if k != TABLE]
    if unknown:
        raise ConfigError(error_text("triggers_file/top_level_key", path=path, key=unknown[0]))
    entries = data.get(TABLE, [])
    if not isinstance(entries, list):
        raise ConfigError(error_text("triggers_file/not_an_array", path=path))
    starts = _blocks(text)
    specs: list[TriggerSpec] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        start = starts[index] if index < len(starts) else None
        label = error_text("triggers_file/label", number=index + 1, name=entry.get("name"))
        extra = [k for k in entry if k not in SPEC_FIELDS]
        if extra:
            where = _where(path, _line_of(text, start, extra[0]))
            raise ConfigError(
                error_text("triggers_file/not_a_field", where=where, label=label, key=extra[0], allowed=SPEC_FIELDS)
            )
        try:
            spec = check_spec(entry)
        except InvalidInput as exc:
            key = exc.field or ""
            where = _where(path, _line_of(text, start, key))
            raise ConfigError(
                error_text("triggers_file/bad_entry", where=where, label=label, key=key, rule=_rule(exc, key))
            ) from None
        if spec.name in seen:
            where = _where(path, start)
            raise ConfigError(
                error_text("triggers_file/name_reused", where=where, label=label, name=spec.name, first=seen[spec.name])
            )
        seen[spec.name] = index + 1
        specs.append(spec)
    return specs


def _rule(exc: InvalidInput, key: str) -> str:
    """The message without a leading repetition of the key."""
    text = str(exc)
    return text[len(key) + 2:] if key and text.startswith(f"{key}: ") else text


def load(ctx: Context, path: str | Path, *, scheduler: Any = None) -> Loaded:
    """Upsert every trigger in the file in one transaction, then release what a class change
    promoted and re-sync the cron jobs. Any bad entry raises ConfigError and writes nothing."""
    source = Path(path)
    if not source.is_file():
        raise ConfigError(error_text("triggers_file/missing", path=source))
    specs = parse(source)
    result = Loaded(str(source))
    writes: list[tuple[int, tuple[int, ...]]] = []
    try:
        with session_scope(ctx.engine) as db:
            for spec in specs:
                write = store.upsert(db, spec, now=ctx.clock.now())
                bucket = result.created if write.created else (result.updated if write.changed else result.unchanged)
                bucket.append(spec.name)
                if write.reclassified is not None:
                    result.reclassified[spec.name] = write.moved
                    writes.append((write.trigger.id or 0, write.promoted))
    except (InvalidInput, Refused) as exc:  # the kind of an existing trigger, say
        raise ConfigError(error_text("triggers_file/refused", path=source, problem=exc)) from None
    store.after_write(ctx, scheduler, ctx.engine, writes)
    log.info(
        "%s: %d created, %d updated, %d unchanged",
        source,
        len(result.created),
        len(result.updated),
        len(result.unchanged),
    )
    return result


def check(settings: Any) -> list[TriggerSpec]:
    """Validate PACER_TRIGGERS_FILE without writing anything: call it before the server binds,
    so a bad file stops start-up with its one line rather than a failed lifespan."""
    path = settings.triggers_file
    if not path:
        return []
    if not Path(path).is_file():
        raise ConfigError(error_text("triggers_file/missing", path=path))
    return parse(Path(path))


def install(pacer: Any) -> Loaded | None:
    """At start, once the APScheduler scheduler is running (so a cron job that is unchanged keeps
    its stored next run, and a fire missed while Pacer was down still happens): load
    PACER_TRIGGERS_FILE when set, then bring the cron jobs in line with the schedule triggers."""
    path = pacer.settings.triggers_file
    if path:
        return load(pacer.ctx, path, scheduler=pacer.scheduler)
    store.after_write(None, pacer.scheduler, pacer.engine)
    return None
