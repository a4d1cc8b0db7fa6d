"""The policies a scenario can be replayed under. `pacer` is the real scheduler as configured;
the two baselines are the real scheduler with the gate switched off and one admission check of
their own in its place, so holds, the ladder, the queue pass and the sweeps are the same code
in all three and only the admission rule differs.

  pacer        the gate as it stands: the cap, the pacing curve with its idle-fleet waiver,
               the slots, the budget ceiling sweep, preemption.
  fifo         no gate — slots only: a spot session starts whenever fewer quota-spending turns
               run than the effective slots, oldest first. Nothing is paused.
  flat-target  the gate before the curve (seed 001, "Why a curve rather than a target"): spot
               work is held while any window's utilization is at or above a flat target
               (policy.flat_target_pct, else 100 - that window's reserve) and otherwise runs
               flat out up to the slots. No curve, no waiver, and admission only — the work
               already running is never paused, as before the budget became a ceiling.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.simulate.scenario import POLICIES, PolicySpec
from scheduler.front import Block, Context, Session, Turn, is_spot, load_policy, read_quota
from templates import render

__all__ = ["POLICIES", "admission_checks", "flat_target_check", "policy_row", "slots_check"]


def policy_row(name: str, spec: PolicySpec) -> dict[str, Any]:
    """The policy row each variant runs with. The baselines turn the gate off and bring their
    own admission rule; preemption only acts with the gate on, so they run without it."""
    return {
        "gating_enabled": spec.gating if name == "pacer" else False,
        "reserve_5h_pct": spec.reserve_5h_pct,
        "reserve_7d_pct": spec.reserve_7d_pct,
        "max_sessions": spec.max_sessions,
        "preemption_enabled": spec.preemption,
        "demand_pacing_enabled": spec.demand_pacing,
    }


def admission_checks(name: str, ctx: Context, spec: PolicySpec) -> list[Callable[..., Block | None]]:
    if name == "pacer":
        return []
    checks = [slots_check(ctx)]
    if name == "flat-target":
        checks.insert(0, flat_target_check(ctx, spec))
    return checks


def _running_quota_turns(db: DBSession, ctx: Context) -> int:
    rows = db.exec(
        select(Session.runtime).join(Turn, col(Turn.session_id) == col(Session.id)).where(Turn.status == "running")
    )
    return sum(1 for runtime in rows if ctx.runtime(runtime).spends_quota)


def _gated(db: DBSession, ctx: Context, session: Session) -> bool:
    return is_spot(session, load_policy(db)) and ctx.runtime(session.runtime).spends_quota


def slots_check(ctx: Context) -> Callable[..., Block | None]:
    def fifo_slots(db: DBSession, session: Session, now: datetime) -> Block | None:
        if not _gated(db, ctx, session):
            return None
        slots = min(load_policy(db).max_sessions, ctx.limits.agent_workers)
        running = _running_quota_turns(db, ctx)
        if running < slots:
            return None
        return Block(
            "fleet_at_cap",
            render("text/simulate_block.j2", kind="slots", running=running, slots=slots),
            skip_only=False,
        )

    return fifo_slots


def flat_target_check(ctx: Context, spec: PolicySpec) -> Callable[..., Block | None]:
    def flat_target(db: DBSession, session: Session, now: datetime) -> Block | None:
        if not _gated(db, ctx, session):
            return None
        reading = read_quota(ctx, now)
        if reading is None:
            return None  # the old gate failed open too
        for w in reading.windows:
            target = spec.target_pct(w.name)
            if w.utilization * 100.0 >= target:
                sentence = render(
                    "text/simulate_block.j2", kind="target", window=w.name, utilization=w.utilization, target=target
                )
                return Block("at_utilization_limit", sentence, skip_only=False)
        return None

    return flat_target
