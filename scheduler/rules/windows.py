"""Window arithmetic on a fixed reset schedule: where the window holding an instant starts and
resets, and how much of a finished turn's run fell before a window's start. Pure; the ledger
quota source (`integrations/quota/ledger.py`) and `pacer simulate` price windows with it.

The schedule: window k of a period P resets at anchor + k*P, for every integer k, so the
current window is the one whose span [anchor + k*P, anchor + (k+1)*P) holds `now`.
"""

from __future__ import annotations

from datetime import datetime, timedelta


def window_bounds(anchor: datetime, period: timedelta, now: datetime) -> tuple[datetime, datetime]:
    """(start, resets_at) of the scheduled window holding `now`; works before the anchor too."""
    if period <= timedelta(0):
        raise ValueError(f"period must be positive (got {period!r})")
    k = (now - anchor) // period
    start = anchor + k * period
    return start, start + period


def share_before(started_at: datetime | None, finished_at: datetime | None, start: datetime) -> float:
    """The share of a finished turn's run that fell before `start`, by time: 0 when it began at or
    after `start`, or has no measurable run to split."""
    if started_at is None or finished_at is None or finished_at <= started_at or started_at >= start:
        return 0.0
    if finished_at <= start:
        return 1.0
    return (start - started_at) / (finished_at - started_at)
