"""What a trigger may say, checked once for every surface that writes one (the REST API and
triggers.toml): its kind, name, class, precedence, prompt template and kind-specific config.

Each rule raises InvalidInput naming the field (`config.cron`, `prompt_template`, …) and what
is allowed; nothing is written before every field has passed.

The kind-specific config is checked in `kind_config.py`, which lists each kind's keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jinja2 import TemplateError, TemplateSyntaxError

from bot.triggers.kind_config import check_config
from scheduler import bounds
from scheduler.errors import InvalidInput
from scheduler.front import parse_class
from templates import error_text
from templates.render import compile_prompt, render_prompt

KINDS: tuple[str, ...] = ("slack", "github_issue", "github_label", "schedule", "ao_event")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:/-]{0,99}$")
TEMPLATE_CHARS = 20_000


@dataclass(frozen=True)
class TriggerSpec:
    """A trigger as a surface asks for it, validated."""

    name: str
    kind: str
    prompt_template: str
    config: dict[str, Any] = field(default_factory=dict)
    scheduling_class: str | None = None  # None: sessions derive from their genesis
    precedence: int | None = None
    concurrency_group: str | None = None
    enabled: bool = True


def check_kind(kind: Any) -> str:
    if kind not in KINDS:
        raise InvalidInput(error_text("trigger_spec/kind_unknown", kind=kind, kinds=KINDS), field="kind")
    return str(kind)


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise InvalidInput(
            error_text("trigger_spec/bad_name", name=name),
            field="name",
        )
    return name


def check_class(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InvalidInput(error_text("trigger_spec/bad_class", value=value), field="scheduling_class")
    cls = parse_class(value)
    return cls.value if cls else None


def check_precedence(value: Any) -> int | None:
    """A trigger takes an absolute number only: the value is stamped on every session it ever
    spawns, so a placement like top_of_spot would be stale by the first spawn."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(
            error_text("trigger_spec/precedence_placement", value=value),
            field="precedence",
        )
    return bounds.check_int(value, "precedence", -bounds.MAX_PRECEDENCE, bounds.MAX_PRECEDENCE)


def check_group(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > 200:
        raise InvalidInput(error_text("trigger_spec/bad_group"), field="concurrency_group")
    return bounds.check_text(value, "concurrency_group")


def _sample_facts(kind: str, config: Any = None) -> dict[str, Any] | None:
    """Facts like the ones a fire gives the template (GitHub's as `bot.github.matching.github_facts`
    builds them), so a typo is caught at write time; None for Slack, whose templates are only
    compiled."""
    if kind in ("github_issue", "github_label"):
        return {"title": "Sample issue", "body": "Sample body", "url": "https://github.com/acme/api/issues/1",
                "labels": ["pacer"], "author": "octocat", "repository": "acme/api", "number": 1,
                "is_pull_request": False, "label": "pacer", "text": "Sample issue\n\nSample body"}
    if kind == "schedule":
        return {"fired_at": datetime(2026, 1, 5, 9, 0, tzinfo=UTC).isoformat(),
                "schedule": {"cron": "0 9 * * 1-5", "timezone": "UTC"}, "text": ""}
    if kind == "ao_event" and isinstance(config, Mapping) and "events" in config:
        fleet = {"running": 1, "ceiling": 3, "stretch_minutes": 0, "cooldown_minutes": 30,
                 "under_since": "2026-01-05T09:00:00+00:00"}
        return {"event": "no_sessions_in_progress", "fleet": fleet, "text": "sample"}
    if kind == "ao_event":
        session = {"id": 1, "title": "sample", "status": "done", "genesis": "api", "scheduling_class": "spot",
                   "precedence": 0, "trigger": None, "requester": None, "prompt": "sample", "output": "sample output",
                   "error": ""}
        return {"session": session, "new_status": "done", "text": "sample output"}
    return None


def check_template(source: Any, kind: str, config: Any = None) -> str:
    """`config` picks the facts an ao_event template is tried on: a session's, or a fleet event's."""
    if not isinstance(source, str) or not source.strip():
        raise InvalidInput(error_text("trigger_spec/template_empty"), field="prompt_template")
    if len(source) > TEMPLATE_CHARS:
        raise InvalidInput(error_text("trigger_spec/template_too_long", limit=TEMPLATE_CHARS), field="prompt_template")
    bounds.check_text(source, "prompt_template")
    try:
        compile_prompt(source)
    except TemplateSyntaxError as exc:
        raise InvalidInput(
            error_text("trigger_spec/template_syntax", line=exc.lineno, message=exc.message), field="prompt_template"
        ) from None
    facts = _sample_facts(kind, config)
    if facts is not None:
        context = {**facts, "trigger": {"id": 1, "name": "sample", "kind": kind}}
        try:
            rendered = render_prompt(source, **context)
        except TemplateError as exc:
            raise InvalidInput(
                error_text("trigger_spec/template_unrenderable", kind=kind, problem=exc, names=sorted(context)),
                field="prompt_template",
            ) from None
        if not rendered:
            raise InvalidInput(
                error_text("trigger_spec/template_renders_empty", kind=kind, names=sorted(context)),
                field="prompt_template",
            )
    return source


def check_spec(values: Mapping[str, Any]) -> TriggerSpec:
    """Every field of a whole trigger (create, or a file entry)."""
    kind = check_kind(values.get("kind"))
    if "prompt_template" not in values:
        raise InvalidInput(error_text("trigger_spec/template_required"), field="prompt_template")
    name = check_name(values.get("name"))
    config = check_config(kind, values.get("config", {}))
    return TriggerSpec(
        name=name,
        kind=kind,
        prompt_template=check_template(values.get("prompt_template"), kind, config),
        config=config,
        scheduling_class=check_class(values.get("scheduling_class")),
        precedence=check_precedence(values.get("precedence")),
        concurrency_group=check_group(values.get("concurrency_group")),
        enabled=_enabled(values.get("enabled", True)),
    )


def _enabled(value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(error_text("trigger_spec/not_bool", field="enabled"), field="enabled")
    return value


SPEC_FIELDS: tuple[str, ...] = (
    "name", "kind", "scheduling_class", "precedence", "prompt_template", "config", "concurrency_group", "enabled",
)
