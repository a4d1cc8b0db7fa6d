"""Genesis and class resolution (seed 001: "Where the class comes from", "Genesis",
"Genesis is inherited", "Stored only when someone chose it").

Pure: every function here takes values and returns values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from scheduler.errors import InvalidInput
from templates import error_text


class Genesis(StrEnum):
    COMMAND = "command"  # a human typed it into a Pacer surface (the seed's web_ui)
    SLACK = "slack"
    GITHUB_ISSUE = "github_issue"
    GITHUB_LABEL = "github_label"
    SCHEDULE = "schedule"
    AO_EVENT = "ao_event"
    API = "api"
    UNKNOWN = "unknown"


class SchedulingClass(StrEnum):
    PRIORITY = "priority"
    SPOT = "spot"


PRIORITY = SchedulingClass.PRIORITY
SPOT = SchedulingClass.SPOT

DEFAULT_CLASS: Mapping[Genesis, SchedulingClass] = {
    Genesis.COMMAND: PRIORITY,
    Genesis.SLACK: PRIORITY,
    Genesis.GITHUB_ISSUE: SPOT,
    Genesis.GITHUB_LABEL: SPOT,
    Genesis.SCHEDULE: SPOT,
    Genesis.AO_EVENT: SPOT,
    Genesis.API: SPOT,
    # A session Pacer cannot explain is never one it throttles.
    Genesis.UNKNOWN: PRIORITY,
}

# The kinds no trigger produces keep a per-kind operator setting; the other five restate a
# trigger condition, so their class lives on the trigger.
OVERRIDABLE: frozenset[Genesis] = frozenset({Genesis.COMMAND, Genesis.API, Genesis.UNKNOWN})
TRIGGER_KINDS: frozenset[Genesis] = frozenset(DEFAULT_CLASS) - OVERRIDABLE


def parse_genesis(value: str | None) -> Genesis:
    """A stored or submitted genesis; anything unrecognised is `unknown`, never an error."""
    try:
        return Genesis(value) if value else Genesis.UNKNOWN
    except ValueError:
        return Genesis.UNKNOWN


def parse_class(value: str | None, *, field: str = "scheduling_class") -> SchedulingClass | None:
    """A class a caller chose; None/''/'default' means "derive it". Bad input is an error."""
    if value is None or value == "" or value == "default":
        return None
    try:
        return SchedulingClass(value)
    except ValueError:
        raise InvalidInput(error_text("policy/class_unknown", field=field, value=value), field=field) from None


def validate_overrides(overrides: Mapping[str, str]) -> dict[Genesis, SchedulingClass]:
    """Operator overrides apply only to command, api and unknown."""
    result: dict[Genesis, SchedulingClass] = {}
    for key, value in overrides.items():
        try:
            genesis = Genesis(key)
        except ValueError:
            raise InvalidInput(error_text("policy/override_genesis_unknown", key=key), field="genesis") from None
        if genesis not in OVERRIDABLE:
            raise InvalidInput(
                error_text("policy/override_not_allowed", genesis=genesis, overridable=sorted(OVERRIDABLE)),
                field="genesis",
            )
        cls = parse_class(value, field=f"genesis_class_overrides.{key}")
        if cls is not None:
            result[genesis] = cls
    return result


def genesis_default(
    genesis: Genesis, overrides: Mapping[Genesis, SchedulingClass] | None = None
) -> SchedulingClass:
    if overrides and genesis in OVERRIDABLE and genesis in overrides:
        return overrides[genesis]
    return DEFAULT_CLASS[genesis]


def resolve_class(
    own: SchedulingClass | None,
    trigger: SchedulingClass | None,
    genesis: Genesis,
    overrides: Mapping[Genesis, SchedulingClass] | None = None,
) -> SchedulingClass:
    """The first source that speaks wins: the session, its trigger, its genesis default."""
    if own is not None:
        return own
    if trigger is not None:
        return trigger
    return genesis_default(genesis, overrides)


@dataclass(frozen=True)
class Lineage:
    """What a new session takes from where it came from."""

    genesis: Genesis
    scheduling_class: SchedulingClass | None
    class_from_trigger: bool


def inherit(
    *,
    declared_genesis: Genesis | None,
    parent_genesis: Genesis | None,
    parent_class: SchedulingClass | None,
    declared_class: SchedulingClass | None,
    trigger_class: SchedulingClass | None,
    fallback: Genesis = Genesis.UNKNOWN,
) -> Lineage:
    """Genesis: declared > parent's (verbatim) > fallback. Class: declared > trigger stamp >
    the parent's explicit class (an explicit class is inherited like genesis) > NULL (derive).
    `parent_*` describe the parent or, for a fork, the forked-from session."""
    genesis = declared_genesis or parent_genesis or fallback
    if declared_class is not None:
        return Lineage(genesis, declared_class, False)
    if trigger_class is not None:
        return Lineage(genesis, trigger_class, True)
    return Lineage(genesis, parent_class, False)
