"""What each kind of trigger may hold in its config, checked and normalized for `spec.check_spec`.
An unknown key is an error naming the allowed ones; every rule raises InvalidInput naming the
field (`config.cron`, `config.filter.genesis`, …).

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

from collections.abc import Callable, Mapping
from typing import Any

from integrations.schedules import cron_trigger
from scheduler import bounds
from scheduler.errors import InvalidInput
from scheduler.front import EVENT_STATES, FILTER_KEYS, FLEET_EVENTS, Genesis
from templates import error_text


def _strings(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidInput(error_text("trigger_spec/not_strings", key=key), field=f"config.{key}")
    return list(value)


def _string(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(error_text("trigger_spec/not_a_string", key=key), field=f"config.{key}")
    return value


def _whole(value: Any) -> Any:
    """A whole number as JSON may write it (`3.0` is the integer 3 to JSON Schema, as to the
    rest of the API): an int; anything else as it came, for the check to judge."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
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


ASSOCIATIONS = (
    "OWNER", "MEMBER", "COLLABORATOR", "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER", "MANNEQUIN", "NONE",
)


def _github_common(config: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "repositories" in config:
        out["repositories"] = [
            bounds.check_repository(v, "config.repositories") for v in _strings(config["repositories"], "repositories")
        ]
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
        sid = _whole(config["session_id"])
        if not bounds.is_id(sid):
            raise InvalidInput(
                error_text("trigger_spec/bad_session_id", max_id=bounds.MAX_ID), field="config.session_id"
            )
        out["session_id"] = sid
    else:
        out["filter"] = _filter(config["filter"])
    states = config.get("states")
    if not isinstance(states, list) or not states or not all(isinstance(s, str) for s in states):
        raise InvalidInput(error_text("trigger_spec/states_required", states=EVENT_STATES), field="config.states")
    bad = [s for s in states if s not in EVENT_STATES]
    if bad:
        raise InvalidInput(
            error_text("trigger_spec/state_unknown", state=bad[0], states=EVENT_STATES), field="config.states"
        )
    out["states"] = list(dict.fromkeys(states))
    if "summary" in config:
        if not isinstance(config["summary"], bool):
            raise InvalidInput(error_text("trigger_spec/summary_not_bool"), field="config.summary")
        out["summary"] = config["summary"]
    return out


def _fleet_events(config: Mapping[str, Any]) -> dict[str, Any]:
    """An ao_event trigger on a fleet event watches no session: events stands alone."""
    beside = [k for k in ("session_id", "filter", "states", "summary") if k in config]
    if beside:
        raise InvalidInput(error_text("trigger_spec/events_alone", key=beside[0]), field=f"config.{beside[0]}")
    events = config["events"]
    if not isinstance(events, list) or not events or not all(isinstance(e, str) for e in events):
        raise InvalidInput(error_text("trigger_spec/events_required", events=FLEET_EVENTS), field="config.events")
    bad = [e for e in events if e not in FLEET_EVENTS]
    if bad:
        raise InvalidInput(
            error_text("trigger_spec/event_unknown", event=bad[0], events=FLEET_EVENTS), field="config.events"
        )
    return {"events": list(dict.fromkeys(events))}


def _filter(flt: Any) -> dict[str, Any]:
    if not isinstance(flt, Mapping) or not flt:
        raise InvalidInput(error_text("trigger_spec/filter_empty", keys=FILTER_KEYS), field="config.filter")
    unknown = [k for k in flt if k not in FILTER_KEYS]
    if unknown:
        raise InvalidInput(
            error_text("trigger_spec/filter_key_unknown", key=unknown[0], keys=FILTER_KEYS),
            field=f"config.filter.{unknown[0]}",
        )
    out: dict[str, Any] = {}
    if "genesis" in flt:
        if flt["genesis"] not in {g.value for g in Genesis}:
            raise InvalidInput(
                error_text("trigger_spec/filter_genesis", genesis=flt["genesis"], geneses=[g.value for g in Genesis]),
                field="config.filter.genesis",
            )
        out["genesis"] = flt["genesis"]
    if "scheduling_class" in flt:
        if flt["scheduling_class"] not in ("priority", "spot"):
            raise InvalidInput(error_text("trigger_spec/filter_class"), field="config.filter.scheduling_class")
        out["scheduling_class"] = flt["scheduling_class"]
    if "trigger" in flt:
        value = _whole(flt["trigger"])
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, str))
            or value == ""
            or (isinstance(value, int) and not bounds.is_id(value))
        ):
            raise InvalidInput(
                error_text("trigger_spec/filter_trigger", max_id=bounds.MAX_ID), field="config.filter.trigger"
            )
        out["trigger"] = value
    return out


# Every kind also takes `cost_cap_usd`: the cost cap its sessions start with (scheduler.holds.cost_caps).
CONFIG_KEYS: Mapping[str, tuple[str, ...]] = {
    "slack": ("channels", "dms", "repository", "cost_cap_usd"),
    "github_issue": ("repositories", "labels", "authors", "trusted_associations", "cost_cap_usd"),
    "github_label": (
        "label", "repositories", "authors", "issues", "pull_requests", "trusted_associations", "cost_cap_usd",
    ),
    "schedule": ("cron", "timezone", "repository", "cost_cap_usd"),
    "ao_event": ("session_id", "filter", "states", "events", "summary", "repository", "cost_cap_usd"),
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
            raise InvalidInput(
                error_text("trigger_spec/cost_cap", value=cap, max_cap=bounds.MAX_COST_CAP_USD),
                field="config.cost_cap_usd",
            )
        checked["cost_cap_usd"] = float(cap)
    return checked
