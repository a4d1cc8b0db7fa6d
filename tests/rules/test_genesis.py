"""Class resolution, one row per rule of seed 001's "Where the class comes from" and "Genesis"."""

from __future__ import annotations

import pytest

from scheduler.errors import InvalidInput
from scheduler.rules.genesis import (
    Genesis,
    SchedulingClass,
    inherit,
    parse_class,
    parse_genesis,
    resolve_class,
    validate_overrides,
)

P, S = SchedulingClass.PRIORITY, SchedulingClass.SPOT
G = Genesis


@pytest.mark.parametrize(
    ("rule", "own", "trigger", "genesis", "overrides", "expected"),
    [
        ("command (web_ui) defaults to priority", None, None, G.COMMAND, {}, P),
        ("slack defaults to priority", None, None, G.SLACK, {}, P),
        ("github_issue defaults to spot", None, None, G.GITHUB_ISSUE, {}, S),
        ("github_label defaults to spot", None, None, G.GITHUB_LABEL, {}, S),
        ("schedule defaults to spot", None, None, G.SCHEDULE, {}, S),
        ("ao_event defaults to spot", None, None, G.AO_EVENT, {}, S),
        ("api defaults to spot", None, None, G.API, {}, S),
        ("unknown is priority on purpose", None, None, G.UNKNOWN, {}, P),
        ("the session's own class beats everything", S, P, G.COMMAND, {G.COMMAND: P}, S),
        ("the trigger's class beats the genesis default", None, P, G.SCHEDULE, {}, P),
        ("the trigger's class beats an operator override", None, S, G.API, {G.API: P}, S),
        ("an operator override beats the genesis default", None, None, G.COMMAND, {G.COMMAND: S}, S),
        ("an override of api applies", None, None, G.API, {G.API: P}, P),
        ("an override of unknown applies", None, None, G.UNKNOWN, {G.UNKNOWN: S}, S),
        ("an override of a trigger kind is ignored", None, None, G.SCHEDULE, {G.SCHEDULE: P}, S),
    ],
)
def test_resolve_class(rule, own, trigger, genesis, overrides, expected) -> None:
    assert resolve_class(own, trigger, genesis, overrides) is expected, rule


@pytest.mark.parametrize(
    ("rule", "kwargs", "genesis", "cls", "from_trigger"),
    [
        (
            "a child takes its parent's genesis verbatim",
            dict(
                declared_genesis=None,
                parent_genesis=G.GITHUB_ISSUE,
                parent_class=None,
                declared_class=None,
                trigger_class=None,
            ),
            G.GITHUB_ISSUE,
            None,
            False,
        ),
        (
            "a declared genesis outranks inheritance",
            dict(
                declared_genesis=G.COMMAND,
                parent_genesis=G.SCHEDULE,
                parent_class=None,
                declared_class=None,
                trigger_class=None,
            ),
            G.COMMAND,
            None,
            False,
        ),
        (
            "an explicit class is inherited by children",
            dict(
                declared_genesis=None, parent_genesis=G.COMMAND, parent_class=S, declared_class=None, trigger_class=None
            ),
            G.COMMAND,
            S,
            False,
        ),
        (
            "a declared class beats the parent's",
            dict(declared_genesis=None, parent_genesis=G.COMMAND, parent_class=S, declared_class=P, trigger_class=None),
            G.COMMAND,
            P,
            False,
        ),
        (
            "the trigger stamps its class",
            dict(
                declared_genesis=G.SCHEDULE,
                parent_genesis=None,
                parent_class=None,
                declared_class=None,
                trigger_class=P,
            ),
            G.SCHEDULE,
            P,
            True,
        ),
        (
            "no parent, nothing declared: the surface's fallback",
            dict(
                declared_genesis=None,
                parent_genesis=None,
                parent_class=None,
                declared_class=None,
                trigger_class=None,
                fallback=G.API,
            ),
            G.API,
            None,
            False,
        ),
        (
            "NULL stays NULL: derived on read",
            dict(
                declared_genesis=G.SLACK,
                parent_genesis=None,
                parent_class=None,
                declared_class=None,
                trigger_class=None,
            ),
            G.SLACK,
            None,
            False,
        ),
    ],
)
def test_inherit(rule, kwargs, genesis, cls, from_trigger) -> None:
    lineage = inherit(**kwargs)
    assert (lineage.genesis, lineage.scheduling_class, lineage.class_from_trigger) == (genesis, cls, from_trigger), rule


def test_unrecognised_genesis_is_unknown_and_priority() -> None:
    assert parse_genesis("carrier-pigeon") is G.UNKNOWN
    assert parse_genesis(None) is G.UNKNOWN
    assert resolve_class(None, None, parse_genesis("???"), {}) is P


@pytest.mark.parametrize("value", ["", None, "default"])
def test_default_class_means_derived(value) -> None:
    assert parse_class(value) is None


def test_bad_class_names_the_field_and_the_choices() -> None:
    with pytest.raises(InvalidInput, match="scheduling_class: 'urgent' is not a class; use priority, spot or default"):
        parse_class("urgent")


def test_overrides_refuse_trigger_kinds() -> None:
    with pytest.raises(InvalidInput, match="github_label sessions take their class from their trigger"):
        validate_overrides({"github_label": "priority"})
    with pytest.raises(InvalidInput, match="not a genesis kind"):
        validate_overrides({"web": "priority"})
    assert validate_overrides({"command": "spot", "api": "default"}) == {G.COMMAND: S}
