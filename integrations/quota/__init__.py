"""Quota sources behind the `scheduler.ports.QuotaSource` port.

    reading = source.read(now)      # QuotaReading, or None: nothing to decide on (fail open)

`agents` (the default for Claude Code and Codex) reads the provider's own figures, which the
agents print while they run and the runner keeps per account (`ReadingBook`), and falls back to the
ledger window by window where the provider has not spoken. `ledger` prices windows from Pacer's
own turn costs against the configured 5-hour and 7-day dollars on a schedule anchored at a given
time. `pool` reads per-account readings from
a URL or a file, and calibrates its windows against the same ledger's dollars. Both use the echo
agent's configured rate for running echo turns that have no history yet. `bot.runtime.adapters` builds
the one PACER_QUOTA_SOURCE names.
"""

from __future__ import annotations

from integrations.quota.agents import AgentsSource, ReadingBook
from integrations.quota.ledger import LedgerSource
from integrations.quota.pool_source import PoolSource

__all__ = ["AgentsSource", "LedgerSource", "PoolSource", "ReadingBook"]
