"""Each trigger kind's config as JSON Schema, for the OpenAPI document: the keys
`bot.triggers.kind_config` takes for the kind and the rules it checks, so a config the document
calls valid is one the server takes. Two rules are narrower here than on the server, never wider:
a cron line is five plain fields (`*`, `*/n` or a number in range, one space apart; the server
reads ranges, lists and names too), and a timezone is one of this machine's IANA names.

A create states the kind, so its config must fit that kind's schema; a change may leave the
kind out, so its config must fit one kind's, and the server answers 409 when it fits another
kind than the trigger's own.
"""

from __future__ import annotations

import zoneinfo
from typing import Any

from bot.triggers.kind_config import ASSOCIATIONS, CONFIG_KEYS
from bot.triggers.spec import KINDS
from scheduler import bounds
from scheduler.front import EVENT_STATES, FLEET_EVENTS, Genesis

_FIELDS = (r"\*|\*/(?:[1-9]|[1-5][0-9])|[0-5]?[0-9]", r"\*|\*/(?:[1-9]|1[0-9]|2[0-3])|[01]?[0-9]|2[0-3]",
           r"\*|\*/(?:[1-9]|[12][0-9]|30)|0?[1-9]|[12][0-9]|3[01]", r"\*|\*/(?:[1-9]|1[01])|0?[1-9]|1[0-2]",
           r"\*|\*/[1-6]|[0-6]")
CRON_PATTERN = "^" + " ".join(f"(?:{field})" for field in _FIELDS) + "$"
_TEXT = {"type": "string", "pattern": r"^[^\x00]*[^\x00\s][^\x00]*$"}  # not blank, no NUL
_NAMES = {"type": "array", "items": {"type": "string", "minLength": 1, "pattern": r"^[^\x00]*$"}}
_REPOSITORY = {"type": "string", "pattern": bounds.REPOSITORY_PATTERN}
_COMMON: dict[str, Any] = {
    "repository": _REPOSITORY,
    "cost_cap_usd": {"type": "number", "exclusiveMinimum": 0, "maximum": bounds.MAX_COST_CAP_USD},
}
_GITHUB: dict[str, Any] = {
    "repositories": {"type": "array", "items": _REPOSITORY},
    "authors": _NAMES,
    "trusted_associations": {"type": "array", "minItems": 1, "items": {"enum": list(ASSOCIATIONS)}},
}
_ID = {"type": "integer", "minimum": 1, "maximum": bounds.MAX_ID}
_FILTER = {
    "type": "object", "additionalProperties": False, "minProperties": 1,
    "properties": {
        "genesis": {"enum": [g.value for g in Genesis]},
        "scheduling_class": {"enum": ["priority", "spot"]},
        "trigger": {"anyOf": [_ID, _TEXT]},
    },
}


def _kind(properties: dict[str, Any], **rules: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": properties, **rules}


def config_schemas() -> dict[str, dict[str, Any]]:
    """Each kind's config schema, keyed by kind."""
    schedule = {"cron": {"type": "string", "pattern": CRON_PATTERN},
                "timezone": {"enum": sorted(zoneinfo.available_timezones() | {"UTC"})}}
    states = {"type": "array", "minItems": 1, "items": {"enum": list(EVENT_STATES)}}
    events = {"type": "array", "minItems": 1, "items": {"enum": list(FLEET_EVENTS)}}
    out = {
        "slack": _kind(
            {"channels": _NAMES, "dms": {"type": "boolean"}, **_COMMON},
            anyOf=[{"required": ["channels"], "properties": {"channels": {"minItems": 1}}},
                   {"required": ["dms"], "properties": {"dms": {"const": True}}}],
        ),
        "github_issue": _kind({**_GITHUB, "labels": _NAMES, "cost_cap_usd": _COMMON["cost_cap_usd"]}),
        "github_label": _kind(
            {**_GITHUB, "label": _TEXT, "issues": {"type": "boolean"}, "pull_requests": {"type": "boolean"},
             "cost_cap_usd": _COMMON["cost_cap_usd"]},
            # it fires on issues, on pull requests, or both
            **{"not": {"required": ["issues", "pull_requests"],
                       "properties": {"issues": {"const": False}, "pull_requests": {"const": False}}}},
        ),
        "schedule": _kind({**schedule, **_COMMON}, required=["cron"]),
        "ao_event": _kind(
            {"session_id": _ID, "filter": _FILTER, "states": states, "events": events, "summary": {"type": "boolean"},
             **_COMMON},
            oneOf=[
                {"required": ["events"], "not": {"anyOf": [{"required": [k]} for k in ("session_id", "filter",
                                                                                        "states", "summary")]}},
                {"required": ["session_id", "states"], "not": {"anyOf": [{"required": ["filter"]},
                                                                         {"required": ["events"]}]}},
                {"required": ["filter", "states"], "not": {"anyOf": [{"required": ["session_id"]},
                                                                     {"required": ["events"]}]}},
            ],
        ),
    }
    assert all(set(out[kind]["properties"]) == set(CONFIG_KEYS[kind]) for kind in KINDS)
    return out


def _needs_keys(config: dict[str, Any]) -> bool:
    return bool(config.get("required") or config.get("anyOf") or config.get("oneOf"))


def describe(schemas: dict[str, Any]) -> None:
    """Put each kind's config schema into TriggerCreate (by its kind) and TriggerPatch (any kind's:
    a change names no kind but the trigger's own, so its config fits that kind or is a 409)."""
    kinds = config_schemas()
    if "TriggerCreate" in schemas:
        # A create without a config has an empty one: a kind that needs keys needs the config.
        schemas["TriggerCreate"]["allOf"] = [
            *schemas["TriggerCreate"].get("allOf", []),
            *({"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
               "then": {"properties": {"config": config}, "required": ["config"] if _needs_keys(config) else []}}
              for kind, config in kinds.items()),
        ]
    if "TriggerPatch" in schemas:
        config = schemas["TriggerPatch"]["properties"].get("config", {})
        config["anyOf"] = [*kinds.values()]
