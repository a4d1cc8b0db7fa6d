"""The turn history the burn rates are measured on, read in two small queries.

    table = load_burn_table(db, fallbacks)     # db: a SQLModel session or a Connection

A rate is measured over each runtime's most recent RECENT_TURNS finished turns that ran for a
measurable time, split by model once turns record one; the arithmetic is `scheduler.rules.burn`'s.

Both queries walk the (runtime, finished_at) index, so 100,000 turns of history cost a few
dozen index entries, never a scan or a Python loop over turns: the first finds the runtimes
with a loose index scan (each step jumps to the next runtime above the last), the second takes
each runtime's latest turns with ORDER BY ... LIMIT and sums them, all runtimes in one UNION.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from sqlalchemy import Float, Integer, bindparam, cast, func, select, union_all

from scheduler.rules.burn import RECENT_TURNS, BurnTable, TurnCost, burn_table
from scheduler.store.models import Turn

TURNS = Turn.__table__  # type: ignore[attr-defined]
# Turns carry the model their runner reported (revision 0021); a turn with none counts toward its
# runtime's rate only. The column is read where it exists, so a database not yet migrated still works.
MODEL = TURNS.c.get("model")


@lru_cache(maxsize=1)
def _runtimes_statement() -> Any:
    steps = select(func.min(TURNS.c.runtime).label("runtime")).cte("runtimes", recursive=True)
    following = select(func.min(TURNS.c.runtime)).where(TURNS.c.runtime > steps.c.runtime)
    steps = steps.union_all(
        select(following.scalar_subquery()).where(steps.c.runtime.is_not(None))
    )
    return select(steps.c.runtime).where(steps.c.runtime.is_not(None))


def runtimes_in_history(db: Any) -> list[str]:
    """Every runtime with a turn on record, one index probe per runtime."""
    return [str(runtime) for runtime in db.execute(_runtimes_statement()).scalars()]


@lru_cache(maxsize=16)
def _recent_statement(runtimes: int) -> Any:
    """The latest-turns sum for `runtimes` runtimes, bound as rt_0..rt_n and per_key. Built once
    per count: composing the UNION costs more than running it."""
    columns = [TURNS.c.runtime, TURNS.c.cost_usd, TURNS.c.duration_ms]
    if MODEL is not None:
        columns.append(MODEL)
    latest = [
        select(
            select(*columns)
            .where(
                TURNS.c.runtime == bindparam(f"rt_{i}"),
                TURNS.c.finished_at.is_not(None),
                TURNS.c.duration_ms > 0,
            )
            .order_by(TURNS.c.finished_at.desc(), TURNS.c.id.desc())
            .limit(bindparam("per_key", type_=Integer))
            .subquery()
        )
        for i in range(runtimes)
    ]
    recent = union_all(*latest).subquery()
    keys = [recent.c.runtime] + ([recent.c.model] if MODEL is not None else [])
    return select(
        *keys,
        func.sum(recent.c.cost_usd),
        func.sum(cast(recent.c.duration_ms, Float)) / 1000.0,
        func.count(),
    ).group_by(*keys)


def recent_turn_costs(db: Any, *, per_key: int = RECENT_TURNS) -> list[TurnCost]:
    """One TurnCost per (runtime, model): the summed cost, seconds and count of the runtime's
    latest `per_key` finished turns that ran for a measurable time."""
    if per_key < 1:
        raise ValueError(f"per_key must be >= 1 (got {per_key!r})")
    runtimes = runtimes_in_history(db)
    if not runtimes:
        return []
    params: dict[str, Any] = {f"rt_{i}": runtime for i, runtime in enumerate(runtimes)}
    params["per_key"] = per_key
    costs = []
    for row in db.execute(_recent_statement(len(runtimes)), params).all():
        model = row[1] if MODEL is not None else None
        cost, seconds, turns = row[-3], row[-2], row[-1]
        costs.append(TurnCost(row[0], model, float(cost or 0.0), float(seconds or 0.0), int(turns)))
    return costs


def load_burn_table(db: Any, fallbacks: Mapping[str, float] | None = None) -> BurnTable:
    return burn_table(recent_turn_costs(db), fallbacks)


__all__ = ["load_burn_table", "recent_turn_costs", "runtimes_in_history"]
