"""A quota source that reuses its source's last reading for half a second.

A burst of admissions (a queue pass, a storm of webhooks) asks for the quota once per decision;
reading a ledger or an HTTP endpoint each time costs more than the decision. What bounds how fast
the gate reacts is the reading anyway, and the ten-minute projection covers spend that lands
inside the reuse window. The composition root wraps the process's source in this one; the
scheduler sees only a `QuotaSource`.

A reading is kept per process: another process's spend, or a provider figure an agent printed
on any process, shows in its next reading, at most `ttl_seconds` later. Half a second: the
provider's word reaches the gate within a second of the agent printing it (P18), and a burst
of decisions, a few milliseconds each, still shares one reading. A failed read is not kept
(the caller falls open and asks again next time); a reading of None is.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from scheduler.ports import QuotaReading, QuotaSource

DEFAULT_TTL_SECONDS = 0.5


class ReusedQuotaSource:
    """`source`'s reading, read again only once `ttl_seconds` have passed since it was read.
    `ttl_seconds=0` reads every time.

    A reading kept from an instant later than the one asked for (another thread read after the
    caller took its `now`) is reused too, however much later: it is fresher than anything the
    caller could read. This is also what keeps a decision from reading the database inside its
    own transaction: the engine reads the quota before it begins and asks again, at the same
    `now`, from inside (an admission check); a second read there would open another connection,
    which on SQLite waits on the caller's own write lock for the whole busy timeout.
    """

    def __init__(self, source: QuotaSource, ttl_seconds: float = DEFAULT_TTL_SECONDS) -> None:
        self.source = source
        self.ttl = timedelta(seconds=ttl_seconds)
        self._kept: tuple[datetime, QuotaReading | None] | None = None

    def read(self, now: datetime) -> QuotaReading | None:
        kept = self._kept
        if kept is not None and self.ttl > timedelta(0) and now - kept[0] < self.ttl:
            return kept[1]
        reading = self.source.read(now)
        latest = self._kept
        if latest is None or latest[0] <= now:  # a slower thread's older reading never replaces a newer one
            self._kept = (now, reading)
        return reading
