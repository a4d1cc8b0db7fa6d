"""The `/pacer policy` words: show, `set key=value …` and `reset-spend <runtime>`, parsed to a
`PolicyShow` or `PolicySet`, or this command's one-line error.

    policy                                  the gate card and the settings
    policy set max_sessions=4 reserve_5h=30 settings (top_up=3 …: `scheduler.rules.top_up`), `override:<genesis>=…`,
    policy set budget:claude_code=50        `budget:<runtime>=<US dollars>|none` cost budgets
    policy reset-spend claude_code          count that runtime's spend from now (seed 002)
    policy max-override 12 for 2h           a temporary max sessions (seed 000); `… clear` ends it

A budget's amount is checked here with the scheduler's own rule (`policy.budget_amount`); whether
the runtime exists is for `set_policy` to say, since only the deployment knows its runtimes.
"""

from __future__ import annotations

import re

import bot.commands.command as c
from bot.commands.cursor import Cursor, shown
from bot.commands.times import parse_duration
from scheduler import bounds
from scheduler.errors import InvalidInput
from scheduler.front import (
    OVERRIDABLE,
    TOP_UP_KEYS,
    TOP_UP_RANGES,
    Genesis,
    budget_amount,
    reserve_percentage,
    reserve_window,
)

POLICY_USAGE = (
    "policy [set gating=on|off preemption=on|off demand_pacing=on|off overage_spot=on|off reserve_5h=<pct> "
    "reserve_7d=<pct> max_sessions=<n> top_up=<n> top_up_stretch=<min> top_up_cooldown=<min> "
    "override:<genesis>=priority|spot|default reserve:<7d_model>=<pct>|default "
    "budget:<runtime>=<usd>|none]  |  policy reset-spend <runtime>"
    "  |  policy max-override <n> for <duration>|clear"
)
POLICY_KEYS = {
    "gating": "gating_enabled",
    "preemption": "preemption_enabled",
    "demand_pacing": "demand_pacing_enabled",
    "overage_spot": "overage_spot_enabled",
    "reserve_5h": "reserve_5h_pct",
    "reserve_7d": "reserve_7d_pct",
    "max_sessions": "max_sessions",
    **TOP_UP_KEYS,
}
_ON = {"on", "true", "yes", "1"}
_OFF = {"off", "false", "no", "0"}
_RUNTIME = re.compile(r"[A-Za-z0-9_.:-]{1,100}", re.ASCII)


def parse_policy(cur: Cursor) -> c.PolicyShow | c.PolicySet:
    action = cur.peek()
    if action is None:
        return c.PolicyShow()
    cur.take("set, reset-spend or max-override")
    if action.lower() == "max-override":
        return _max_override(cur)
    if action.lower() == "reset-spend":
        runtime = _runtime(cur, cur.take("<runtime>"), "runtime")
        cur.end()
        return c.PolicySet(reset_spend=(runtime,))
    if action.lower() != "set":
        raise cur.fail("not_a_policy_action", action=shown(action))
    if cur.peek() is None:
        raise cur.fail("missing_setting")
    changes: dict[str, bool | float | int] = {}
    overrides: dict[str, str | None] = {}
    budgets: dict[str, float | None] = {}
    reserves: dict[str, float | None] = {}
    while (pair := cur.peek()) is not None:
        cur.take("key=value")
        key, sep, value = pair.partition("=")
        key = key.lower()
        if not sep or not key:
            raise cur.fail("not_key_value", pair=shown(pair))
        if key.startswith("override:"):
            genesis = _override_genesis(cur, key.split(":", 1)[1])
            if genesis in overrides:
                raise cur.fail("given_twice", key=key)
            overrides[genesis] = class_choice(cur, key, value)
            continue
        if key.startswith("budget:"):
            runtime = _runtime(cur, pair.split("=", 1)[0].split(":", 1)[1], "budget")
            if runtime in budgets:
                raise cur.fail("given_twice", key=key)
            budgets[runtime] = _budget(cur, runtime, value)
            continue
        if key.startswith("reserve:"):
            window = _reserve_window(cur, key.split(":", 1)[1])
            if window in reserves:
                raise cur.fail("given_twice", key=key)
            reserves[window] = _reserve(cur, window, value)
            continue
        if key not in POLICY_KEYS:
            raise cur.fail(
                "not_a_policy_key",
                key=shown(key),
                allowed=[*POLICY_KEYS, "override:<genesis>", "budget:<runtime>", "reserve:<7d_model>"],
            )
        attribute = POLICY_KEYS[key]
        if attribute in changes:
            raise cur.fail("given_twice", key=key)
        changes[attribute] = _policy_value(cur, key, value)
    return c.PolicySet(
        tuple(changes.items()), tuple(overrides.items()), tuple(budgets.items()), tuple(reserves.items())
    )


def _max_override(cur: Cursor) -> c.PolicySet:
    value = cur.take("<n> for <duration>, or clear")
    if value.lower() == "clear":
        cur.end()
        return c.PolicySet(temporary_max=(None, None))
    number = cur.integer(value, "max-override", 1, bounds.MAX_SESSIONS)
    if (word := cur.take("for <duration>")).lower() != "for":
        raise cur.fail("unexpected", token=shown(word))
    token = cur.take("a duration after for, e.g. 2h")
    cur.end()
    return c.PolicySet(temporary_max=(number, cur.lift(lambda: parse_duration(token, field="for"))))


def _policy_value(cur: Cursor, key: str, value: str) -> bool | float | int:
    lowered = value.lower()
    if key in {"gating", "preemption", "demand_pacing", "overage_spot"}:
        if lowered in _ON | _OFF:
            return lowered in _ON
        raise cur.fail("on_or_off", key=key, value=shown(value))
    if key == "max_sessions" or POLICY_KEYS[key] in TOP_UP_RANGES:
        return cur.integer(value, key, *TOP_UP_RANGES.get(POLICY_KEYS[key], (1, bounds.MAX_SESSIONS)))
    number = lowered.removesuffix("%")
    if re.fullmatch(r"\d{1,3}(\.\d{1,4})?", number, re.ASCII) is None or not 0 <= float(number) <= 100:
        raise cur.fail("percentage", key=key, value=shown(value))
    return float(number)


def _runtime(cur: Cursor, value: str, field: str) -> str:
    if _RUNTIME.fullmatch(value) is None:
        raise cur.fail("not_a_runtime", field=field, value=shown(value))
    return value


def _budget(cur: Cursor, runtime: str, value: str) -> float | None:
    if value.lower() == "none":
        return None
    try:
        return budget_amount(runtime, value)
    except InvalidInput as exc:
        raise cur.relay(exc) from None


def _reserve_window(cur: Cursor, window: str) -> str:
    try:
        return reserve_window(window)
    except InvalidInput as exc:
        raise cur.relay(exc) from None


def _reserve(cur: Cursor, window: str, value: str) -> float | None:
    if value.lower() == "default":
        return None
    try:
        return reserve_percentage(window, value)
    except InvalidInput as exc:
        raise cur.relay(exc) from None


def _override_genesis(cur: Cursor, value: str) -> str:
    genesis = cur.genesis(value, "override")
    if Genesis(genesis) not in OVERRIDABLE:
        raise cur.fail("override_from_trigger", genesis=genesis, only=sorted(OVERRIDABLE))
    return genesis


def class_choice(cur: Cursor, key: str, value: str) -> str | None:
    """A class as `override:` and `trigger … class` take it: priority, spot, or default (None)."""
    lowered = value.lower()
    if lowered not in {"priority", "spot", "default"}:
        raise cur.fail("not_an_override_class", key=key, value=shown(value))
    return None if lowered == "default" else lowered
