"""The words that make a session or shape its claim: `new`, `reply`, `weight`, `capacity` and `cap`.

A claim is seed 000's: a weight (default 1, 0 allowed: it adds no load but keeps its turn) and,
at most one of, the session's own budget as a whole number (`capacity 1` runs it alone) or as a
multiple of the fleet's slots (`capacity 1.5x`); `capacity fleet` goes back to the fleet's.

A cost cap is US dollars, with or without the `$` (`cap 12 5`, `new --cap $5 …`, `new cap:5 …`);
`none` clears it (`scheduler.holds.cost_caps`). A new session's rank is a precedence or `top`, as
`rank` takes them (`new --rank 40 …`, `new rank:top …`).
"""

from __future__ import annotations

import re

import bot.commands.command as c
from bot.commands.cursor import INT_PATTERN, Cursor, shown
from scheduler import bounds
from scheduler.errors import InvalidInput
from scheduler.front import ClaimChange

_NUMBER = re.compile(r"\d{1,6}(\.\d{1,6})?", re.ASCII)
FLEET = "fleet"
NO_CAP = "none"


def _number(cur: Cursor, token: str, field: str) -> float:
    if _NUMBER.fullmatch(token) is None:
        raise cur.fail("not_a_number", field=field, token=shown(token))
    return float(token)


def _claim(cur: Cursor, weight: float | None, budget: str | None) -> ClaimChange:
    """A claim from its words, checked as every surface checks it (`bounds.check_claim`)."""
    claim = ClaimChange(weight=weight)
    if budget is not None:
        lowered = budget.lower()
        if lowered == FLEET:
            claim = ClaimChange(weight=weight, fleet_budget=True)
        elif lowered.endswith("x"):
            claim = ClaimChange(weight=weight, multiplier=_number(cur, lowered[:-1], "capacity"))
        elif lowered.isdigit():
            claim = ClaimChange(weight=weight, capacity=cur.integer(lowered, "capacity", 1, bounds.MAX_CAPACITY))
        else:
            raise cur.fail("not_a_budget", token=shown(budget))
    try:
        bounds.check_claim(1.0 if claim.weight is None else claim.weight, claim.capacity, claim.multiplier)
    except InvalidInput as exc:
        raise cur.relay(exc) from None
    return claim


def _cost_cap(cur: Cursor, token: str, *, clearable: bool) -> float | None:
    """A cost cap from its word, checked as every surface checks it (`bounds.check_cost_cap`)."""
    if clearable and token.lower() == NO_CAP:
        return None
    amount = token.removeprefix("$")
    if _NUMBER.fullmatch(amount) is None:
        raise cur.fail("not_a_cap", token=shown(token))
    try:
        bounds.check_cost_cap(float(amount))
    except InvalidInput as exc:
        raise cur.relay(exc) from None
    return float(amount)


def _rank(cur: Cursor, token: str, given: c.NewRank | None) -> c.NewRank:
    """A new session's rank: a precedence, or `top` (the head of the spot queue), given once."""
    if given is not None:
        raise cur.fail("given_twice", key="rank")
    if token.lower() == "top":
        return "top"
    if INT_PATTERN.fullmatch(token) is None:
        raise cur.fail("not_a_new_rank", token=shown(token))
    return cur.integer(token, "rank", -bounds.MAX_PRECEDENCE, bounds.MAX_PRECEDENCE)


def new(cur: Cursor) -> c.New:
    spot = False
    cap: float | None = None
    rank: c.NewRank | None = None
    while (token := cur.peek()) is not None and token.startswith("--"):
        if token.lower() == "--cap":
            cur.take("--cap")
            cap = _cost_cap(cur, cur.take("a cost cap in US dollars, e.g. $5"), clearable=False)
            continue
        if token.lower() == "--rank":
            cur.take("--rank")
            rank = _rank(cur, cur.take("a rank after --rank: a whole number or top"), rank)
            continue
        if token.lower() != "--spot":
            raise cur.fail("only_spot_option", token=shown(token))
        cur.take("--spot")
        spot = True
    repository = None
    weight: float | None = None
    budget: str | None = None
    while (
        (token := cur.peek()) is not None
        and token.lower().split(":", 1)[0] in ("repo", "weight", "capacity", "cap", "rank")
        and ":" in token
    ):
        key, value = cur.take("an option").split(":", 1)
        key = key.lower()
        if key == "repo":
            repository = cur.repository(value, "repo")
        elif key == "weight":
            weight = _number(cur, value, "weight")
        elif key == "cap":
            cap = _cost_cap(cur, value, clearable=False)
        elif key == "rank":
            rank = _rank(cur, value, rank)
        else:
            budget = value
    claim = _claim(cur, weight, budget)
    prompt = cur.rest()
    if not prompt:
        raise cur.fail("missing_prompt")
    return c.New(prompt, spot=spot, repository=repository, claim=claim, cost_cap_usd=cap, rank=rank)


def reply(cur: Cursor) -> c.ThreadReply:
    session_id = cur.session_id()
    text = cur.rest()
    if not text:
        raise cur.fail("missing_text")
    return c.ThreadReply(session_id, text)


def weight(cur: Cursor) -> c.Weight:
    session_id = cur.session_id()
    value = _number(cur, cur.take("a weight, e.g. 0.5"), "weight")
    cur.end()
    return c.Weight(session_id, _claim(cur, value, None))


def capacity(cur: Cursor) -> c.Capacity:
    session_id = cur.session_id()
    budget = cur.take("a budget: a whole number, a multiplier like 1.5x, or fleet")
    cur.end()
    return c.Capacity(session_id, _claim(cur, None, budget))


def cap(cur: Cursor) -> c.Cap:
    session_id = cur.session_id()
    value = _cost_cap(cur, cur.take("a cost cap in US dollars, e.g. 5, or none"), clearable=True)
    cur.end()
    return c.Cap(session_id, value)
