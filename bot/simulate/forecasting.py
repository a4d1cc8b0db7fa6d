"""How good the start-time forecast is, measured (issue 32, P20 item 3).

When a session arrives and waits (its first turn did not start at once), the simulation asks the
forecast Pacer would show for it — `scheduler.steering.forecasting`, from the simulated store and
the quota reading the gate just took — and keeps it. The score compares it with when the session
really started: the error of the median (p50 and p90 of |forecast - actual|) and the share of the
actual starts inside the forecast's range. Sessions arriving at one instant are forecast together,
once every arrival of the instant is in the queue.

`bot.simulate.scoring.forecast_report` scores them.

The forecast reads the simulated store, never writes it, and takes no quota reading of its own (a
provider's meter counts reads, and hears a report on one): the run it measures is the run it
would have been without it.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam
from sqlalchemy import select as sa_select
from sqlmodel import col

from scheduler.front import Forecast, Session, Status, core, forecast_from, session_scope

if TYPE_CHECKING:
    from bot.simulate.engine import Simulation

_STATUS = sa_select(col(Session.status)).where(col(Session.id) == bindparam("sid"))


class Remembering:
    """A quota source that keeps the last reading it passed on, for the forecast to reuse."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.last: Any = None

    def read(self, now: datetime) -> Any:
        self.last = self.source.read(now)
        return self.last


class ForecastLog:
    """The forecast each waiting arrival was given, by session id (None: none could be made)."""

    def __init__(self, sim: Simulation, source: Remembering, *, enabled: bool = True) -> None:
        self.sim, self.source, self.enabled = sim, source, enabled
        self.made: dict[int, Forecast | None] = {}
        self.pending: list[int] = []

    def arrived(self, session_id: int) -> None:
        if not self.enabled:
            return
        if not self.pending:
            self.sim.deferrer.schedule(f"sim-forecast:{session_id}", self.sim.clock.now(), self._forecast)
        self.pending.append(session_id)

    def _forecast(self) -> None:
        began = time.perf_counter()
        sim, now = self.sim, self.sim.clock.now()
        waiting = frozenset(sid for sid in self.pending if _status(sim, sid) == Status.WAITING.value)
        self.pending = []
        if waiting:
            found = forecast_from(sim.ctx, self.source.last, now, seed=min(waiting), targets=waiting)
            for sid in sorted(waiting):
                self.made[sid] = found.get(sid)
        sim.timings["forecast"] += time.perf_counter() - began


def _status(sim: Simulation, sid: int) -> str | None:
    with session_scope(sim.engine) as db:
        value = core(db, _STATUS, {"sid": sid}).scalar()
    return None if value is None else str(value)
