"""The provider's own readings as a quota window's figures. Pure: readings and `now` in, one
window's measure (or why there is none) out.

    measured = measure(readings, "five_hour", timedelta(hours=5), now)
    if isinstance(measured, Measured): ...   # utilization and reset, the provider's word
    else: ...                                # a Fallback: the ledger's estimate stands in, and says why

Each account's latest reading of the window counts (seed 001, "Read across the whole pool"): the
window's utilization is their average and its reset the soonest one to come, the next moment the
figure can fall. A reading describes its window until that window's reset; after it, it describes
one that has rolled over and counts for nothing (the same rule the gate's `live_window` follows).
A reading that names no reset is trusted for one period from when it was heard.

`rejected` means the window is spent whatever utilization came with it (Claude Code often prints
none), so it counts as at least 100%: the gate's cap then holds spot work until the reset, before
the next turn fails on it; priority work is never held by it.

Shared accounts: agents on several accounts of one billing organisation all report the same
bucket, so their readings carry identical utilization and reset. Readings that agree on both are
one bucket, averaged once, not once per account; `Measured.accounts` counts the accounts read and
`Measured.buckets` the distinct buckets averaged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from scheduler.ports import ProviderReading

REJECTED = "rejected"


class Fallback(StrEnum):
    """Why the ledger's estimate stands in for a window (the gate card says which)."""

    NO_READING = "no_reading"  # no agent has reported this window yet
    ROLLED_OVER = "rolled_over"  # every reading is from before the window's last reset
    NO_UTILIZATION = "no_utilization"  # the readings name the window but not how full it is


@dataclass(frozen=True)
class Measured:
    """A window as the provider reports it, across the accounts that reported it."""

    utilization: float
    resets_at: datetime
    provider: str
    accounts: int
    buckets: int
    rejected: bool  # some account was refused on this window
    warned: bool  # some account is past the provider's warning threshold
    using_overage: bool  # some account is spending overage (extra usage) on it


def account_utilization(reading: ProviderReading) -> float | None:
    """How full the window is for one account: its utilization, at least 1.0 once refused."""
    if reading.status == REJECTED:
        return max(reading.utilization or 0.0, 1.0)
    return reading.utilization


def is_current(reading: ProviderReading, period: timedelta, now: datetime) -> bool:
    """Whether the reading still describes the window open now."""
    if reading.resets_at is not None:
        return reading.resets_at > now
    return now - reading.observed_at < period


def measure(readings: Sequence[ProviderReading], kind: str, period: timedelta, now: datetime) -> Measured | Fallback:
    """The window `kind` as the accounts' latest readings report it, or why they cannot."""
    mine = [r for r in readings if r.kind == kind]
    if not mine:
        return Fallback.NO_READING
    current = [r for r in mine if is_current(r, period, now)]
    if not current:
        return Fallback.ROLLED_OVER
    usable = [(r, u) for r in current if (u := account_utilization(r)) is not None]
    if not usable:
        return Fallback.NO_UTILIZATION
    buckets = {(round(u, 4), r.resets_at): u for r, u in usable}
    resets = [r.resets_at for r, _ in usable if r.resets_at is not None]
    return Measured(
        utilization=sum(buckets.values()) / len(buckets),
        resets_at=min(resets) if resets else now + period,
        provider=usable[0][0].provider,
        accounts=len({r.account for r, _ in usable}),
        buckets=len(buckets),
        rejected=any(r.status == REJECTED for r, _ in usable),
        warned=any(r.status == "allowed_warning" for r, _ in usable),
        using_overage=any(r.is_using_overage for r, _ in usable),
    )


__all__ = ["REJECTED", "Fallback", "Measured", "account_utilization", "is_current", "measure"]
