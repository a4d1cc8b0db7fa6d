"""The burn-rate table every surface shows (seed 001's parity row "Read the $/min of each harness +
model combination"): each runtime + model measured from its finished turns (`rules/burn.py`), a
runtime measured without a model, then each configured runtime nothing has been measured on, at
the rate the gate projects it with (`engine/fleet.py: burn_rate`)."""

from __future__ import annotations

from scheduler.context import Context
from scheduler.engine.fleet import burn_rate
from scheduler.rules.burn import PROJECTION_MINUTES, BurnRate, BurnTable, RateSource

__all__ = ["PROJECTION_MINUTES", "BurnRate", "burn_rows"]


def burn_rows(ctx: Context) -> list[BurnRate]:
    """The table as the gate reads it now: `ctx.burn` (refreshed from the turn history), then the
    configured runtimes it has no row for."""
    table = ctx.burn if ctx.burn is not None else BurnTable({})
    rows = table.rows()
    known = {row.runtime for row in rows}
    for name in sorted(ctx.limits.runtimes):
        if name not in known:
            rows.append(BurnRate(name, None, burn_rate(ctx, name), 0, RateSource.FALLBACK))
    return rows
