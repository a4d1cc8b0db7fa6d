"""The system clock. Tests and the simulator move a virtual one by hand (`scheduler.testing`)."""

from __future__ import annotations

from datetime import UTC, datetime


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)
