"""The turn history the burn rates are measured on, read in one aggregate query.

    table = load_burn_table(db, fallbacks)     # db: a SQLModel session or a Connection

For each runtime (and model, once turns record one) it sums cost and duration over that key's
most recent RECENT_TURNS finished turns with a measured duration; the arithmetic is
`scheduler.burn`'s. A window function ranks the turns per key, so 100,000 rows of history cost
one query and a handful of result rows, never a Python loop over turns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Float, cast, func, select

from scheduler.burn import RECENT_TURNS, BurnTable, TurnCost, burn_table
from scheduler.models import Turn

TURNS = Turn.__table__  # type: ignore[attr-defined]
# Turns carry a model once a runner reports one; until the column exists every turn of a
# runtime shares the runtime's rate.
MODEL = TURNS.c.get("model")


def recent_turn_costs(db: Any, *, per_key: int = RECENT_TURNS) -> list[TurnCost]:
    """One TurnCost per (runtime, model): the summed cost, seconds and count of its latest
    `per_key` finished turns that ran for a measurable time."""
    if per_key < 1:
        raise ValueError(f"per_key must be >= 1 (got {per_key!r})")
    keys = [TURNS.c.runtime] + ([MODEL] if MODEL is not None else [])
    rank = func.row_number().over(
        partition_by=keys, order_by=(TURNS.c.finished_at.desc(), TURNS.c.id.desc())
    )
    ranked = (
        select(*keys, TURNS.c.cost_usd, TURNS.c.duration_ms, rank.label("rank"))
        .where(TURNS.c.finished_at.is_not(None), TURNS.c.duration_ms > 0)
        .subquery()
    )
    grouped = [ranked.c.runtime] + ([ranked.c.model] if MODEL is not None else [])
    query = (
        select(
            *grouped,
            func.sum(ranked.c.cost_usd),
            func.sum(cast(ranked.c.duration_ms, Float)) / 1000.0,
            func.count(),
        )
        .where(ranked.c.rank <= per_key)
        .group_by(*grouped)
    )
    costs = []
    for row in db.execute(query).all():
        model = row[1] if MODEL is not None else None
        cost, seconds, turns = row[-3], row[-2], row[-1]
        costs.append(TurnCost(row[0], model, float(cost or 0.0), float(seconds or 0.0), int(turns)))
    return costs


def load_burn_table(db: Any, fallbacks: Mapping[str, float] | None = None) -> BurnTable:
    return burn_table(recent_turn_costs(db), fallbacks)


__all__ = ["load_burn_table", "recent_turn_costs"]
