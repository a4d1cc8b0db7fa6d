"""Quota sources behind the `scheduler.ports.QuotaSource` port.

    source = build_quota_source(settings, engine)
    reading = source.read(now)      # QuotaReading, or None: nothing to decide on (fail open)

`ledger` (the default) prices windows from Pacer's own turn costs against PACER_WINDOW_5H_USD /
PACER_WINDOW_7D_USD on a schedule anchored at PACER_WINDOW_ANCHOR. `pool` reads per-account
readings from PACER_POOL_URL when set, else PACER_POOL_FILE, and calibrates its windows against
the same ledger's dollars. Both use the echo agent's configured rate for running echo turns
that have no history yet.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from integrations.quota.ledger import LedgerSource
from integrations.quota.pool_source import PoolSource
from scheduler.burn import fallback_rates
from scheduler.ports import QuotaSource


def build_ledger(settings: Any, engine: Engine) -> LedgerSource:
    return LedgerSource(
        engine,
        capacity_5h_usd=settings.window_5h_usd,
        capacity_7d_usd=settings.window_7d_usd,
        anchor=datetime.fromisoformat(settings.window_anchor),
        fallbacks=fallback_rates(echo_cost_usd=settings.echo_cost_usd, echo_seconds=settings.echo_seconds),
    )


def build_quota_source(settings: Any, engine: Engine) -> QuotaSource:
    """The source PACER_QUOTA_SOURCE names, wired to `engine`."""
    ledger = build_ledger(settings, engine)
    if settings.quota_source == "ledger":
        return ledger
    if settings.pool_url:
        return PoolSource(url=settings.pool_url, spent_since=ledger.spent_since)
    return PoolSource(file=settings.pool_file, spent_since=ledger.spent_since)


__all__ = ["LedgerSource", "PoolSource", "build_ledger", "build_quota_source"]
