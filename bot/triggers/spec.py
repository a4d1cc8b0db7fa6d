"""What a trigger may say, checked once for every surface that writes one (the REST API and
triggers.toml): its kind, name, class, precedence, prompt template and kind-specific config.

Each rule raises InvalidInput naming the field (`config.cron`, `prompt_template`, …) and what
is allowed; nothing is written before every field has passed.

    kind           config keys (required*)
    slack          channels (channel ids), dms (bool) — at least one of the two; repository
    github_issue   repositories ("owner/name"; absent: any), labels, authors, trusted_associations
    github_label   label (default pacer), repositories, authors, issues, pull_requests (bool),
                   trusted_associations (default OWNER, MEMBER, COLLABORATOR)
    schedule       cron* (crontab line), timezone (IANA name, default UTC); repository
    ao_event       session_id* or filter* ({genesis, trigger, scheduling_class}), states*; or
                   events* (fleet events: no_sessions_in_progress) alone; repository

`repository` ("owner/name") is the repository the trigger's sessions work in; GitHub triggers
take it from the event instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jinja2 import TemplateError, TemplateSyntaxError

from integrations.schedules import cron_trigger
from scheduler import bounds
from scheduler.errors import InvalidInput
from scheduler.front import EVENT_STATES, FILTER_KEYS, FLEET_EVENTS, Genesis, parse_class
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
    """Facts like the ones a fire gives the template (GitHub's as `bot.github.intake.github_facts`
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
        fleet = {"running": 1, "ceiling": 3, "stretch_minutes": 0, "cooldown_minutes": 30, "under_since": "2026-01-05T09:00:00+00:00"}
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
        raise InvalidInput(error_text("trigger_spec/template_syntax", line=exc.lineno, message=exc.message), field="prompt_template") from None
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


# --------------------------------------------------------------------------- config, by kind


def _strings(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidInput(error_text("trigger_spec/not_strings", key=key), field=f"config.{key}")
    return list(value)


def _string(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(error_text("trigger_spec/not_a_string", key=key), field=f"config.{key}")
    return value


def _slack(config: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "channels" in config:
        out["channels"] = _strings(config["channels"], "channels")
    if "dms" in config:
        if not isinstance(config["dms"], bool):
            raise InvalidInput(error_text("trigger_spec/not_bool", field="config.dms"), field="config.dms")
        out["dms"] = config["dms"]
    if not out.get("channels") and not out.get("dms"):
        raise InvalidInput(error_text("trigger_spec/slack_needs_source"), field="config.channels")
    return out


ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR", "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER", "MANNEQUIN", "NONE")


def _github_common(config: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "repositories" in config:
        out["repositories"] = [bounds.check_repository(v, "config.repositories") for v in _strings(config["repositories"], "repositories")]
    if "authors" in config:
        out["authors"] = _strings(config["authors"], "authors")
    if "trusted_associations" in config:
        values = _strings(config["trusted_associations"], "trusted_associations")
        bad = [v for v in values if v.upper() not in ASSOCIATIONS]
        if bad or not values:
            raise InvalidInput(
                error_text("trigger_spec/bad_association", value=bad[0] if bad else "[]", associations=ASSOCIATIONS),
                field="config.trusted_associations",
            )
        out["trusted_associations"] = [v.upper() for v in values]
    return out


def _github_issue(config: Mapping[str, Any]) -> dict[str, Any]:
    out = _github_common(config)
    if "labels" in config:
        out["labels"] = _strings(config["labels"], "labels")
    return out


def _github_label(config: Mapping[str, Any]) -> dict[str, Any]:
    out = _github_common(config)
    if "label" in config:
        out["label"] = _string(config["label"], "label")
    for key in ("issues", "pull_requests"):
        if key in config:
            if not isinstance(config[key], bool):
                raise InvalidInput(error_text("trigger_spec/not_bool", field=f"config.{key}"), field=f"config.{key}")
            out[key] = config[key]
    if out.get("issues") is False and out.get("pull_requests") is False:
        raise InvalidInput(error_text("trigger_spec/never_fires"), field="config.issues")
    return out


def _schedule(config: Mapping[str, Any]) -> dict[str, Any]:
    if "cron" not in config:
        raise InvalidInput(error_text("trigger_spec/cron_required"), field="config.cron")
    cron = _string(config["cron"], "cron")
    timezone = _string(config.get("timezone", "UTC"), "timezone")
    cron_trigger(cron, timezone)
    return {"cron": " ".join(cron.split()), "timezone": timezone}


def _ao_event(config: Mapping[str, Any]) -> dict[str, Any]:
    if "events" in config:
        return _fleet_events(config)
    out: dict[str, Any] = {}
    has_session, has_filter = "session_id" in config, "filter" in config
    if has_session == has_filter:
        raise InvalidInput(
            error_text("trigger_spec/session_or_filter"),
            field="config.session_id",
        )
    if has_session:
        sid = config["session_id"]
        if not bounds.is_id(sid):
            raise InvalidInput(error_text("trigger_spec/bad_session_id", max_id=bounds.MAX_ID), field="config.session_id")
        out["session_id"] = sid
    else:
        out["filter"] = _filter(config["filter"])
    states = config.get("states")
    if not isinstance(states, list) or not states or not all(isinstance(s, str) for s in states):
        raise InvalidInput(error_text("trigger_spec/states_required", states=EVENT_STATES), field="config.states")
    bad = [s for s in states if s not in EVENT_STATES]
    if bad:
        raise InvalidInput(error_text("trigger_spec/state_unknown", state=bad[0], states=EVENT_STATES), field="config.states")
    out["states"] = list(dict.fromkeys(states))
    return out


def _fleet_events(config: Mapping[str, Any]) -> dict[str, Any]:
    """An ao_event trigger on a fleet event watches no session: events stands alone."""
    beside = [k for k in ("session_id", "filter", "states") if k in config]
    if beside:
        raise InvalidInput(error_text("trigger_spec/events_alone", key=beside[0]), field=f"config.{beside[0]}")
    events = config["events"]
    if not isinstance(events, list) or not events or not all(isinstance(e, str) for e in events):
        raise InvalidInput(error_text("trigger_spec/events_required", events=FLEET_EVENTS), field="config.events")
    bad = [e for e in events if e not in FLEET_EVENTS]
    if bad:
        raise InvalidInput(error_text("trigger_spec/event_unknown", event=bad[0], events=FLEET_EVENTS), field="config.events")
    return {"events": list(dict.fromkeys(events))}


def _filter(flt: Any) -> dict[str, Any]:
    if not isinstance(flt, Mapping) or not flt:
        raise InvalidInput(error_text("trigger_spec/filter_empty", keys=FILTER_KEYS), field="config.filter")
    unknown = [k for k in flt if k not in FILTER_KEYS]
    if unknown:
        raise InvalidInput(error_text("trigger_spec/filter_key_unknown", key=unknown[0], keys=FILTER_KEYS), field=f"config.filter.{unknown[0]}")
    out: dict[str, Any] = {}
    if "genesis" in flt:
        if flt["genesis"] not in {g.value for g in Genesis}:
            raise InvalidInput(error_text("trigger_spec/filter_genesis", genesis=flt["genesis"], geneses=[g.value for g in Genesis]), field="config.filter.genesis")
        out["genesis"] = flt["genesis"]
    if "scheduling_class" in flt:
        if flt["scheduling_class"] not in ("priority", "spot"):
            raise InvalidInput(error_text("trigger_spec/filter_class"), field="config.filter.scheduling_class")
        out["scheduling_class"] = flt["scheduling_class"]
    if "trigger" in flt:
        value = flt["trigger"]
        if isinstance(value, bool) or not isinstance(value, (int, str)) or value == "" or (isinstance(value, int) and not bounds.is_id(value)):
            raise InvalidInput(error_text("trigger_spec/filter_trigger", max_id=bounds.MAX_ID), field="config.filter.trigger")
        out["trigger"] = value
    return out


# Every kind also takes `cost_cap_usd`: the cost cap its sessions start with (scheduler.holds.cost_caps).
CONFIG_KEYS: Mapping[str, tuple[str, ...]] = {
    "slack": ("channels", "dms", "repository", "cost_cap_usd"),
    "github_issue": ("repositories", "labels", "authors", "trusted_associations", "cost_cap_usd"),
    "github_label": ("label", "repositories", "authors", "issues", "pull_requests", "trusted_associations", "cost_cap_usd"),
    "schedule": ("cron", "timezone", "repository", "cost_cap_usd"),
    "ao_event": ("session_id", "filter", "states", "events", "repository", "cost_cap_usd"),
}
_CONFIG_CHECKS: Mapping[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "slack": _slack,
    "github_issue": _github_issue,
    "github_label": _github_label,
    "schedule": _schedule,
    "ao_event": _ao_event,
}


def check_config(kind: str, config: Any) -> dict[str, Any]:
    """The kind's config, normalized; an unknown key is an error naming the allowed ones."""
    if not isinstance(config, Mapping):
        raise InvalidInput(error_text("trigger_spec/config_not_object"), field="config")
    problem = bounds.tree_problem(config)
    if problem is not None:
        raise InvalidInput(error_text("trigger_spec/config_problem", problem=problem), field="config")
    allowed = CONFIG_KEYS[kind]
    unknown = [k for k in config if k not in allowed]
    if unknown:
        raise InvalidInput(
            error_text("trigger_spec/config_key_unknown", key=unknown[0], kind=kind, allowed=allowed),
            field=f"config.{unknown[0]}",
        )
    checked = _CONFIG_CHECKS[kind](config)
    if "repository" in config:
        checked["repository"] = bounds.check_repository(config["repository"], "config.repository")
    if "cost_cap_usd" in config:
        cap = config["cost_cap_usd"]
        if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not 0 < cap <= bounds.MAX_COST_CAP_USD:
            raise InvalidInput(error_text("trigger_spec/cost_cap", value=cap, max_cap=bounds.MAX_COST_CAP_USD), field="config.cost_cap_usd")
        checked["cost_cap_usd"] = float(cap)
    return checked


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
