"""The gate for one queue pass: the fleet's snapshot built once and rebuilt after a start, and
the answers of candidates that ask alike kept for the rest of the pass."""

from __future__ import annotations

from typing import Any

from scheduler.engine.attempt import Work
from scheduler.engine.candidates import Candidate
from scheduler.engine.fleet import asking_for, build_snapshot, burn_rate
from scheduler.engine.pause import Dormant
from scheduler.engine.records import is_running
from scheduler.rules.gate import Decision, decide
from scheduler.rules.snapshot import Asking, PolicyView
from scheduler.store.models import Session, Status


class PassGate:
    """The gate for one queue pass: the snapshot is built once and rebuilt only after a start
    changes the fleet, and candidates that ask the same question (class, quota, burn) against the
    same snapshot get the same answer without asking again. A held candidate runs no turn, so it
    is never counted in the fleet it is asking about."""

    def __init__(self, work: Work, policy: PolicyView) -> None:
        self.work, self.policy = work, policy
        self._snapshot: Any = None
        self._memo: dict[tuple[bool, bool, float, float, float, int | None, float | None], Decision] = {}

    def decide(self, session: Session) -> Decision:
        work = self.work
        running = session.status == Status.RUNNING.value and is_running(work.db, session.id or 0)
        asking = asking_for(session, work.ctx, self.policy, running=running)
        if running:
            return decide(self._built(), asking, work.now)
        return self._ask(asking)

    def decide_for(self, cand: Candidate | Dormant, *, margin: float = 0.0) -> Decision:
        """The gate's answer for a held or paused candidate (never running), from its columns
        alone; `margin` widens the reserve as a resume does (`pause.resume_refusal`)."""
        ctx = self.work.ctx
        asking = Asking(
            session_id=cand.id, is_spot=cand.is_spot(self.policy), already_running=False,
            spends_quota=ctx.runtime(cand.runtime).spends_quota, burn_per_min=burn_rate(ctx, cand.runtime),
            weight=cand.weight, capacity=cand.capacity, capacity_multiplier=cand.capacity_multiplier,
        )
        return self._ask(asking, margin)

    def _built(self) -> Any:
        if self._snapshot is None:
            self._snapshot = build_snapshot(self.work.db, self.work.ctx, self.policy, self.work.reading)
            self._memo.clear()
        return self._snapshot

    def _ask(self, asking: Asking, margin: float = 0.0) -> Decision:
        snapshot = self._built()
        key = (
            asking.is_spot,
            asking.spends_quota,
            asking.burn_per_min,
            margin,
            asking.weight,
            asking.capacity,
            asking.capacity_multiplier,
        )
        if key not in self._memo:
            self._memo[key] = decide(snapshot, asking, self.work.now, reserve_margin_pct=margin)
        return self._memo[key]

    def fleet_changed(self) -> None:
        self._snapshot = None
