"""What every surface accepts, in one place: the REST API's request models, the `/pacer` grammar
(Slack and the console), the trigger and policy checks and the webhooks all read these bounds,
so a value one surface takes, every surface takes.

Numbers follow the columns that store them (INTEGER, 32 bits signed):

    ids             1 .. 2,147,483,647
    precedence      -1,000,000,000 .. 1,000,000,000   room left in the column for the nudges
                                                      of a reorder and a spawn's +1
    max_sessions    1 .. 10,000
    capacity        1 .. 10,000                       a session's own slot budget
    capacity multiplier  above 0 .. 100, finite       its budget as a multiple of the fleet's
    weight          0 .. 10,000, finite
    cost cap        above 0 .. 1,000,000 US dollars, finite    what a session's turns may cost

A repository is "owner/name" by GitHub's own rules, one rule for every door (the API, the
webhook, `/pacer`, triggers and the triggers file) and for the workspace (`REPOSITORY_PATTERN`):

    owner   1 to 39 letters and digits, single hyphens between them (no '_', no '.', not
            starting or ending with '-'): a user's or an organisation's login
    name    1 to 100 letters, digits, '.', '-' and '_'; not '.' or '..' (a path out of the
            mirrors), and not ending in '.git' in any case (`acme/x.git` is how a clone URL
            names `acme/x`, and the mirror of `x` is `x.git`). A leading '.' is a name, as
            GitHub's own `acme/.github` is

So it is safe as a path under the workspaces and inside a remote URL. GitHub's names are
case-insensitive: `check_repository` answers the name in lower case, the form every key takes
(a session's repository and so its mirror, its concurrency group, the intake key), so `ACME/API`
and `acme/api` are one repository. A name GitHub delivers keeps GitHub's spelling where a person
reads it (an issue's title and status comment).

Text: PostgreSQL cannot store NUL, and a lone UTF-16 surrogate is not UTF-8 at all, so neither
database takes it. What a person or an API caller sends with either is refused, naming the field
(`check_text`); what GitHub or Slack delivers is cleaned instead (`clean_text`: each becomes
U+FFFD), because refusing a delivery loses it, or has GitHub redeliver it for ever.

JSON a caller sends whole (a trigger's config, an invocation's context) is walked without
recursion (`tree_problem`): every key and string is text as above, every number finite, and it
nests at most MAX_DEPTH deep.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from scheduler.errors import InvalidInput
from templates import error_text

MAX_ID = 2**31 - 1
MAX_PRECEDENCE = 1_000_000_000
MAX_SESSIONS = 10_000
MAX_CAPACITY = MAX_SESSIONS
MAX_WEIGHT = float(MAX_SESSIONS)
MAX_MULTIPLIER = 100.0
MAX_DEPTH = 32
MAX_COST_CAP_USD = 1_000_000.0

OWNER_PATTERN = r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}"
_NAME_ENDS = r"(?![A-Za-z0-9._-])"
NAME_PATTERN = rf"(?!\.{{1,2}}{_NAME_ENDS})(?![A-Za-z0-9._-]*\.[Gg][Ii][Tt]{_NAME_ENDS})[A-Za-z0-9._-]{{1,100}}"
# Whole: a JSON Schema pattern as well as Python's (`(?![\s\S])`: `$` would let a newline end it).
REPOSITORY_PATTERN = rf"^{OWNER_PATTERN}/{NAME_PATTERN}(?![\s\S])"
REPOSITORY = re.compile(REPOSITORY_PATTERN)
MAX_REPOSITORY_CHARS = 39 + 1 + 100
REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def check_claim(weight: float, capacity: int | None, multiplier: float | None) -> None:
    """A session's claim on the slot budget (seed 000): a weight, and at most one of its own
    budget as a whole number or as a multiple of the fleet's."""
    if not 0 <= weight <= MAX_WEIGHT:  # NaN fails both comparisons
        raise InvalidInput(error_text("sessions/weight_range", max_weight=MAX_WEIGHT), field="weight")
    if capacity is not None and multiplier is not None:
        raise InvalidInput(error_text("sessions/capacity_and_multiplier"), field="capacity")
    if capacity is not None and capacity < 1:
        raise InvalidInput(error_text("sessions/capacity_below_one"), field="capacity")
    if capacity is not None:
        check_int(capacity, "capacity", 1, MAX_CAPACITY)
    if multiplier is not None and not 0 < multiplier <= MAX_MULTIPLIER:
        raise InvalidInput(
            error_text("sessions/multiplier_range", max_multiplier=MAX_MULTIPLIER), field="capacity_multiplier"
        )


def check_cost_cap(cap: float | None) -> None:
    """A session's cost cap: None (no cap) or a finite number of dollars above 0."""
    if cap is not None and not 0 < cap <= MAX_COST_CAP_USD:  # NaN fails both comparisons
        raise InvalidInput(error_text("sessions/cost_cap_range", max_cap=MAX_COST_CAP_USD), field="cost_cap_usd")


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored, as the end of a sentence that names the field; None if it can."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    return error_text("bounds/unstorable_text", code=ord(found.group()), position=found.start())


def check_text(value: str, field: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise InvalidInput(error_text("bounds/field_problem", field=field, problem=problem), field=field)
    return value


def clean_text(value: str) -> str:
    """`value` with every NUL and lone surrogate replaced by U+FFFD, so it can be stored."""
    return _UNSTORABLE.sub(REPLACEMENT, value)


def is_blank(value: str) -> bool:
    return not value.strip()


def int_problem(value: int, low: int, high: int) -> str | None:
    if low <= value <= high:
        return None
    return error_text("bounds/out_of_range", value=value, low=low, high=high)


def check_int(value: int, field: str, low: int, high: int) -> int:
    problem = int_problem(value, low, high)
    if problem is not None:
        raise InvalidInput(error_text("bounds/field_problem", field=field, problem=problem), field=field)
    return value


def is_repository(value: Any) -> bool:
    """Whether `value` is a repository "owner/name" by the rule above."""
    return isinstance(value, str) and REPOSITORY.match(value) is not None


def check_repository(value: Any, field: str = "repository") -> str:
    """`value` in lower case when it is a repository "owner/name"; otherwise InvalidInput naming
    `field` and the rule."""
    if not is_repository(value):
        raise InvalidInput(
            error_text("bounds/not_a_repository", field=field, value=str(value)[: MAX_REPOSITORY_CHARS + 20]),
            field=field,
        )
    return str(value).lower()


def is_id(value: Any) -> bool:
    """A whole number a row id column can hold (bool is not a number here)."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_ID


def tree_problem(value: Any) -> str | None:
    """Why a JSON value cannot be stored, prefixed with where in it (`a.0.b: ...`); None if it can."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        at = f"{where}: " if where else ""
        if isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                return at + problem
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{at}{item} is not a finite number"
        elif isinstance(item, Mapping | list | tuple):
            if depth >= MAX_DEPTH:
                return f"{at}nests deeper than {MAX_DEPTH} levels"
            pairs = item.items() if isinstance(item, Mapping) else enumerate(item)
            for key, child in pairs:
                if isinstance(key, str) and (problem := text_problem(key)) is not None:
                    return f"{at}the key {key!r} {problem}"
                stack.append((child, f"{where}.{key}" if where else str(key), depth + 1))
    return None


def clean_tree(value: Any, depth: int = 0) -> Any:
    """`value` (JSON from GitHub or Slack) with every string and key cleaned; containers deeper
    than MAX_DEPTH become None, since nothing Pacer reads lies that deep."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        if depth >= MAX_DEPTH:
            return None
        return {clean_text(k) if isinstance(k, str) else k: clean_tree(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if depth >= MAX_DEPTH:
            return None
        return [clean_tree(v, depth + 1) for v in value]
    return value

