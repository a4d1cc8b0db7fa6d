"""The gate card: what the gate would decide for a spot session now, with every number behind
it — windows, reserve, burn, sustainable rate, which ceiling holds and what lifts it, when the
pool comes back, and the queue's counts. One builder; `pacer policy`, GET /api/v1/policy and
the App Home all render it, so they cannot disagree. Beside the gate, the backlog top-up ceiling
(`scheduler.rules.top_up`): its thresholds, the running count against it and since when it is under."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.context import Context
from scheduler.engine.attempt import Block, Work
from scheduler.engine.fleet import build_snapshot, waiting_for_workers
from scheduler.engine.verdict import new_spot_asking, spot_probe, verdict
from scheduler.pauses.top_up_sweep import TopUpReading, read_top_up
from scheduler.ports import AccountReading, QuotaReading
from scheduler.rules.demand import DemandCheck
from scheduler.rules.explain import Explanation, explain
from scheduler.rules.gate import Decision, evaluate
from scheduler.rules.pool import CapacityState, capacity_sentence, pool_capacity, weekly_reset_sentence
from scheduler.rules.snapshot import PolicyView, Snapshot
from scheduler.store.models import Session, Status
from scheduler.store.policy import load_policy


@dataclass(frozen=True)
class GateCard:
    now: datetime
    policy: PolicyView
    snapshot: Snapshot
    decision: Decision
    explanation: Explanation
    spot_burn: float
    running_priority: int
    running_spot: int
    held: int
    paused: int
    preempted: int
    parked_on_purpose: int
    pool_state: CapacityState
    pool_sentence: str
    weekly_sentence: str | None
    top_up: TopUpReading
    waiting_for_workers: int
    held_by: Block | None = (
        None  # a check beyond the gate that holds a new spot session (an operator hold on class:spot)
    )

    @property
    def load(self) -> float:
        """The slot budget's load: the weighted claims of the running turns the gate counts."""
        return sum(max(t.weight, 0.0) for t in self.snapshot.fleet if t.spends_quota)

    @property
    def admitted(self) -> bool:
        """Whether a new spot session would start now: the one verdict, not the gate's alone."""
        return self.held_by is None and self.decision.allowed

    def as_dict(self) -> dict[str, object]:
        d = self.decision
        return {
            "now": self.now.isoformat(),
            "policy": {
                "gating_enabled": self.policy.gating_enabled,
                "reserve_5h_pct": self.policy.reserve_5h_pct,
                "reserve_7d_pct": self.policy.reserve_7d_pct,
                "max_sessions": self.policy.max_sessions,
                "max_sessions_override": self.policy.max_sessions_override,
                "max_sessions_override_until": (
                    self.policy.max_sessions_override_until.isoformat()
                    if self.policy.max_sessions_override_until
                    else None
                ),
                "effective_slots": self.snapshot.effective_slots,
                "slots_unreachable": self.snapshot.slots_unreachable,
                "preemption_enabled": self.policy.preemption_enabled,
                "demand_pacing_enabled": self.policy.demand_pacing,
                "overage_spot_enabled": self.policy.overage_spot,
                "genesis_class_overrides": {str(k): str(v) for k, v in self.policy.overrides.items()},
            },
            "admission": {
                "allowed": self.admitted,
                "held_by": {"reason": str(self.held_by.reason), "sentence": self.held_by.sentence}
                if self.held_by
                else None,
            },
            "decision": {
                "allowed": d.allowed,
                "reason": str(d.reason),
                "ceiling": str(d.ceiling) if d.ceiling else None,
                "budget_spent_windows": list(d.budget_spent_windows),
                "stops_running_work": d.stops_running_work,
                "waiver_applied": d.waiver_applied,
                "pace_mode": d.pace_mode,
                "why": self.explanation.why,
                "until": self.explanation.until,
            },
            "windows": [
                {
                    "name": w.name,
                    "calibrated": w.calibrated,
                    "unit": "usd" if w.calibrated else "fraction",
                    "capacity": w.capacity,
                    "spent": w.spent,
                    "reserved": w.reserved,
                    "spot_budget": w.spot_budget,
                    "spot_left": w.spot_left,
                    "minutes_left": round(w.minutes_left, 1),
                    "resets_at": w.resets_at.isoformat(),
                    "sustainable_rate_per_min": w.sustainable_rate,
                    "fleet_burn_per_min": w.fleet_burn,
                    "measured_by": w.measured_by,
                    "fallback": w.fallback,
                    "using_overage": w.using_overage,
                    "overage_refused": w.overage_refused,
                    "accounts": w.accounts,
                    "buckets": w.buckets,
                    "demand": _demand(w.demand),
                }
                for w in d.windows
            ],
            "fleet": {
                "running_priority": self.running_priority,
                "running_spot": self.running_spot,
                "slots": self.snapshot.effective_slots,
                "load": self.load,
                "workers": self.snapshot.agent_workers,
                "waiting_for_workers": self.waiting_for_workers,
            },
            "queue": {
                "held": self.held,
                "paused": self.paused,
                "preempted": self.preempted,
                "parked_on_purpose": self.parked_on_purpose,
            },
            "pool": {
                "state": str(self.pool_state),
                "capacity": self.pool_sentence,
                "next_7d_reset": self.weekly_sentence,
            },
            "top_up": self._top_up(),
        }

    def _top_up(self) -> dict[str, object]:
        t = self.top_up
        return {
            "ceiling": t.policy.ceiling,
            "stretch_minutes": t.policy.stretch_minutes,
            "cooldown_minutes": t.policy.cooldown_minutes,
            "running": t.running,
            "under": t.is_under,
            "ceiling_above_workers": t.policy.ceiling > self.snapshot.agent_workers,
            "under_since": _iso(t.state.under_since),
            "last_fired_at": _iso(t.state.fired_at),
            "next_firing_at": _iso(t.next_firing),
        }


def _demand(c: DemandCheck | None) -> dict[str, object] | None:
    """A window's demand check, when the curve alone would have held it (`scheduler.rules.demand`)."""
    if c is None:
        return None
    return {"committed": c.committed, "waiting": c.waiting, "arrivals": c.arrivals, "total": c.total,
            "room": c.room, "margin_pct": c.margin_pct, "holds": c.holds}


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _count(db: DBSession, *where: ColumnElement[bool] | bool) -> int:
    return int(db.exec(select(func.count()).select_from(Session).where(*where)).one())


def build_card(
    db: DBSession, ctx: Context, reading: QuotaReading | None, now: datetime, *, runtime: str | None = None
) -> GateCard:
    policy = load_policy(db)
    snapshot = build_snapshot(db, ctx, policy, reading)
    name = runtime or next(iter(ctx.limits.runtimes), "echo")
    asking = new_spot_asking(ctx, name)
    decision = evaluate(snapshot, asking, now)
    said = verdict(Work(db, ctx, now), spot_probe(db, name, now), lambda: decision, gate_too=True)
    waiting = Session.status == Status.WAITING.value
    pool = snapshot.pool if snapshot.pool is not None else pool_capacity(_as_one_account(reading), now)
    weekly = weekly_reset_sentence(snapshot.pool, now) if snapshot.pool is not None else None
    return GateCard(
        now=now,
        policy=policy,
        snapshot=snapshot,
        decision=decision,
        explanation=explain(decision, now),
        spot_burn=asking.burn_per_min,
        running_priority=sum(1 for t in snapshot.fleet if not t.is_spot),
        running_spot=sum(1 for t in snapshot.fleet if t.is_spot),
        held=_count(db, waiting, col(Session.hold_reason).is_not(None)),
        paused=_count(db, waiting, col(Session.pause_reason).in_(["at_utilization_limit", "spot_budget"])),
        preempted=_count(db, col(Session.pause_reason) == "preempted_by_priority"),
        parked_on_purpose=_count(db, waiting, col(Session.pause_reason) == "user_spot_queue"),
        pool_state=pool.state,
        pool_sentence=capacity_sentence(pool, now),
        weekly_sentence=weekly,
        top_up=read_top_up(db, policy.top_up),
        waiting_for_workers=waiting_for_workers(db, ctx.limits.agent_workers),
        held_by=said.block,
    )


def _as_one_account(reading: QuotaReading | None) -> list[AccountReading]:
    """A source that reads windows but no accounts (the ledger) is one account: it comes back
    when each of its spent windows rolls over. No reading at all is no account read, which the
    pool answers as "nothing here says when work resumes"."""
    if reading is None or not reading.windows:
        return []
    by_name = {w.name: w for w in reading.windows}
    five, seven = by_name.get("5h"), by_name.get("7d")
    return [AccountReading(
        name="windows", status="active",
        utilization_5h=five.utilization if five else None, utilization_7d=seven.utilization if seven else None,
        reset_5h=five.resets_at if five else None, reset_7d=seven.resets_at if seven else None,
    )]


def render_card(card: GateCard, flavour: str = "text") -> str:
    from templates import render_chat

    return render_chat("gate_card", flavour, card=card, d=card.decision)
