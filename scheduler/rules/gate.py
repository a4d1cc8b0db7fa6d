"""The gate: the single pure decision `evaluate(snapshot, asking, now) -> Decision` (seed 001,
"The gate" through "Held until is a condition, not a clock").

A spot session takes a turn while, for both windows, three checks hold:
  the cap   — spent + the fleet's and this session's projected ten-minute spend stays inside
              the window's non-reserved budget (absolute: it protects the priority reserve).
              Only spend inside the window counts: with less than ten minutes to its rollover
              the projection runs to the rollover, since what is spent after it is the next
              window's. The projection starts when the reading was taken, not at `now`: what
              the running fleet spent since is in no reading yet (a reading is reused for a few
              seconds, and a pool's accounts report late), and near a rollover, where the
              horizon is seconds, that unrecorded spend is what crossed the line;
  the pace  — the fleet's burn, this session's included, is at or under the sustainable rate
              (spot budget left / time left); waived when no spot work is in flight, and for
              a longer window the shorter one's caps cannot spend out before its rollover
              (`pace_unneeded`: a deviation from the seed, explained there); and with demand-aware
              pacing on, for a calibrated window whose demand fits its spot budget left
              (`scheduler.rules.demand`: idle only because the budget is spent, never by care);
  a slot    — its weighted claim fits (seed 000): the weights of the quota-spending turns
              running now, plus its own, stay within its budget — min(max sessions, agent
              workers), or the capacity it authored, or its multiple of the slots — unless it
              is already running (it is counted in the fleet itself). A zero weight fits while
              the fleet is not full; with every weight at 1.0 this is seed 001's session count.
Priority is never held. Every uncertain condition allows, with its reason named. A window whose
reset has already passed has rolled over (a reading taken just before the rollover, or reused
across it): it is read as the next window, with nothing spent yet.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from scheduler.rules.demand import Deferred, DemandCheck, check
from scheduler.rules.slots import budget_for, fits
from scheduler.rules.snapshot import Asking, Snapshot, WindowState

PROJECTION_MINUTES = 10.0
RESUME_MARGIN_PCT = 5.0


class Reason(StrEnum):
    GATING_DISABLED = "gating_disabled"
    NO_SNAPSHOT = "no_snapshot"
    UNAVAILABLE = "unavailable"
    WITHIN_LIMITS = "within_limits"
    AT_UTILIZATION_LIMIT = "at_utilization_limit"
    FLEET_AT_CAP = "fleet_at_cap"
    PRIORITY = "priority"  # not gated: priority work never waits on quota or slots
    NO_QUOTA = "spends_no_quota"  # not gated: this runtime spends nothing against the windows


class Ceiling(StrEnum):
    FLEET_CAP = "fleet_cap"
    SPOT_BUDGET = "spot_budget"
    PACING_CURVE = "pacing_curve"


@dataclass(frozen=True)
class WindowFigures:
    """The numbers behind a decision, per window, in the window's own unit."""

    name: str
    label: str
    calibrated: bool
    capacity: float
    spent: float
    reserved: float
    spot_budget: float  # capacity - reserved
    spot_left: float  # spot_budget - spent (may be negative)
    minutes_left: float
    resets_at: datetime
    sustainable_rate: float | None  # per minute; None when the window has rolled over
    fleet_burn: float | None  # per minute, None in fraction mode
    # what the cap projects inside the window: spend since the reading, then ten minutes or to the rollover (0 in
    # fraction mode)
    projected: float
    within_cap: bool
    within_pace: bool
    pace_unneeded: bool = False  # a shorter window's caps cannot spend this one out before its rollover
    pace_passed: bool = True  # the pace's own answer, before the idle-fleet waiver or an unneeded pace
    unrecorded: float = 0.0  # the part of `projected` spent since the reading, which it does not hold yet
    measured_by: str | None = None  # the provider, when utilization and reset are its own word
    fallback: str | None = None  # why the ledger's estimate stands in for the provider's word
    demand: DemandCheck | None = None  # asked when the curve alone would hold: it holds only if this does
    using_overage: bool = False  # the provider says an account spends overage (extra usage) on it
    overage_refused: bool = False  # ... and the policy refuses overage to spot work: the cap holds
    accounts: int = 0  # the accounts the provider's figures were read from
    buckets: int = 0  # the distinct buckets among them

    @property
    def released_by_demand(self) -> bool:
        """Ahead of its curve, and the pace did not hold: the window's demand fits its budget."""
        return self.demand is not None and not self.demand.holds


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: Reason
    ceiling: Ceiling | None = None
    budget_spent_windows: tuple[str, ...] = ()
    paced_windows: tuple[str, ...] = ()
    waiver_applied: bool = False
    windows: tuple[WindowFigures, ...] = ()
    fleet_running: int = 0
    fleet_load: float = 0.0  # the running turns' weighted claims
    spot_in_flight: int = 0
    slots: int = 0
    slot_budget: float = 0.0  # what the asking session's claim is decided against
    own_weight: float = 1.0
    configured_max: int = 0
    slots_unreachable: bool = False
    own_burn: float = 0.0
    own_exceeds_curve: bool = False
    reserve_margin_pct: float = 0.0
    pool: object | None = None
    error: str | None = None
    window_labels: dict[str, str] = field(default_factory=dict)
    demand_pacing: bool = False  # the policy switch: the pace holds only when the demand needs it

    @property
    def pace_mode(self) -> str:
        """Which decided the pace: "demand" when a window ahead of its curve was let through because
        its demand fits, else "curve"."""
        return "demand" if any(w.released_by_demand for w in self.windows) else "curve"

    @property
    def held(self) -> bool:
        return not self.allowed

    @property
    def stops_running_work(self) -> bool:
        """Only a spent budget pauses running spot work; the pace and the slots only admit."""
        return self.held and self.ceiling is Ceiling.SPOT_BUDGET

    def figures(self, name: str) -> WindowFigures | None:
        return next((w for w in self.windows if w.name == name), None)


def _allow(reason: Reason, snapshot: Snapshot | None = None, **kw: object) -> Decision:
    extra: dict[str, object] = {}
    if snapshot is not None:
        extra = dict(
            slots=snapshot.effective_slots,
            configured_max=snapshot.policy.effective_max,
            slots_unreachable=snapshot.slots_unreachable,
            pool=snapshot.pool,
        )
    return Decision(allowed=True, reason=reason, **{**extra, **kw})  # type: ignore[arg-type]


def projection_minutes(minutes_left: float) -> float:
    """The cap's horizon: ten minutes of burn, or what is left of the window when less — spend
    after the rollover lands in the next window, not in this one's budget."""
    return max(min(PROJECTION_MINUTES, minutes_left), 0.0)


def live_window(w: WindowState, now: datetime) -> WindowState:
    """The window as it stands at `now`. A reset that has passed describes a window that has
    already rolled over (seed 001, "When the pool comes back"): its reading is last window's,
    so the window now open has spent nothing yet and resets a whole number of periods later."""
    if w.resets_at > now or w.period <= timedelta(0):
        return w
    periods = (now - w.resets_at) // w.period + 1
    return replace(w, spent=0.0, resets_at=w.resets_at + periods * w.period, using_overage=False)


def pace_unneeded(
    windows: Sequence[WindowState], reserve_pct: Mapping[str, float], now: datetime, *, margin_pct: float = 0.0,
) -> frozenset[str]:
    """Longer windows whose pace protects nothing: the most spot work can spend before the
    window's rollover — what a shorter window's cap still allows now, plus a whole spot budget
    for each of its windows that opens before then — fits in what the longer window has left.

    A deviation from seed 001's "for both windows", measured in `pacer simulate`: the weekly
    curve starts below the burn of the fleet the 5-hour budget pays for, so on a quiet first day
    it held every few sessions while the 5-hour budget it could never outspend went unspent
    (70% of it, in the saturated example's first window). The weekly cap still holds; its pace
    comes back as soon as the bound no longer fits (priority spend, a smaller weekly budget).

    `margin_pct` (the resume margin) narrows only the longer window's room: widening the shorter
    window's reserve too would shrink the bound and skip a pace the plain reserves need."""
    calibrated = [w for w in windows if w.calibrated and w.period > timedelta(0)]
    unneeded: set[str] = set()
    for longer in calibrated:
        longer_reserve = min(reserve_pct.get(longer.name, 0.0) + margin_pct, 100.0)
        longer_left = longer.capacity * (1 - longer_reserve / 100.0) - longer.spent
        for shorter in calibrated:
            if shorter.period >= longer.period:
                continue
            budget = shorter.capacity * (1 - reserve_pct.get(shorter.name, 0.0) / 100.0)
            most = max(budget - shorter.spent, 0.0)
            if shorter.resets_at < longer.resets_at:
                opening = (longer.resets_at - shorter.resets_at) / shorter.period
                most += budget * math.ceil(opening)
            if most <= longer_left:
                unneeded.add(longer.name)
                break
    return frozenset(unneeded)


@dataclass(frozen=True)
class _Asked:
    """What one window's figures are computed against: the burns in $/min, and whether the
    pace is waived (the idle fleet) or not needed (the session spends nothing there)."""

    fleet_burn: float
    own_burn: float
    pace_waived: bool
    pace_unneeded: bool = False
    accruing_burn: float = 0.0  # what was running when the reading was taken: the fleet, and the asker if it runs
    overage_spot: bool = False  # the policy lets spot work run on the provider's overage, counted as spend


def unrecorded_minutes(w: WindowState, now: datetime) -> float:
    """Minutes of this window's spend since its reading, which the reading cannot hold yet."""
    if w.read_at is None:
        return 0.0
    since = max(w.read_at, w.resets_at - w.period)
    return max((now - since).total_seconds() / 60.0, 0.0)


def _figures(w: WindowState, reserve_pct: float, asked: _Asked, now: datetime) -> WindowFigures:
    """One window's figures. Overage is money beyond the plan: while the provider says an account
    spends it on the window, spot work waits for the reset unless the policy counts it as spend."""
    figures = _spend_figures(w, reserve_pct, asked, now)
    refused = w.using_overage and not asked.overage_spot
    return replace(
        figures, within_cap=figures.within_cap and not refused, using_overage=w.using_overage,
        overage_refused=refused, accounts=w.accounts, buckets=w.buckets,
    )


def _spend_figures(w: WindowState, reserve_pct: float, asked: _Asked, now: datetime) -> WindowFigures:
    fleet_burn, own_burn, pace_waived, pace_unneeded = (
        asked.fleet_burn,
        asked.own_burn,
        asked.pace_waived,
        asked.pace_unneeded,
    )
    reserved = w.capacity * reserve_pct / 100.0
    spot_budget = w.capacity - reserved
    spot_left = spot_budget - w.spent
    minutes_left = max((w.resets_at - now).total_seconds() / 60.0, 0.0)
    if w.calibrated:
        burn = fleet_burn + own_burn
        unrecorded = asked.accruing_burn * unrecorded_minutes(w, now)
        projected = burn * projection_minutes(minutes_left) + unrecorded
        within_cap = w.spent + projected <= spot_budget
        sustainable = spot_left / minutes_left if minutes_left > 0 else None
        passed = sustainable is None or burn <= sustainable
        within_pace = pace_waived or pace_unneeded or passed
        return WindowFigures(
            w.name,
            w.label,
            True,
            w.capacity,
            w.spent,
            reserved,
            spot_budget,
            spot_left,
            minutes_left,
            w.resets_at,
            sustainable,
            fleet_burn,
            projected,
            within_cap,
            within_pace,
            pace_unneeded,
            passed,
            unrecorded,
            w.measured_by,
            w.fallback,
        )
    # Fraction mode: no burn projection. The cap is the spent fraction against the non-reserved
    # fraction; the pace is the straight line that reaches the spot budget at the rollover.
    period_min = w.period.total_seconds() / 60.0
    elapsed_share = 1.0 - (minutes_left / period_min) if period_min > 0 else 1.0
    within_cap = w.spent < spot_budget
    on_curve = w.spent <= spot_budget * max(min(elapsed_share, 1.0), 0.0)
    sustainable = spot_left / minutes_left if minutes_left > 0 else None
    return WindowFigures(
        w.name, w.label, False, w.capacity, w.spent, reserved, spot_budget, spot_left,
        minutes_left, w.resets_at, sustainable, None, 0.0, within_cap, pace_waived or on_curve,
        pace_passed=on_curve and period_min > 0, measured_by=w.measured_by, fallback=w.fallback,
    )


def _demand_aware(figures: tuple[WindowFigures, ...], snapshot: Snapshot, now: datetime) -> tuple[WindowFigures, ...]:
    """A calibrated window ahead of its curve is let through when its demand fits its spot budget
    left (`scheduler.rules.demand`); the demand is read only then. The cap is not touched."""
    ahead = [f for f in figures if f.calibrated and not f.within_pace]
    if not ahead or not snapshot.policy.demand_pacing:
        return figures
    demand = snapshot.demand.get() if isinstance(snapshot.demand, Deferred) else snapshot.demand
    if demand is None:
        return figures
    checked = {f.name: check(demand, f.spot_left, now, f.resets_at) for f in ahead}
    return tuple(
        replace(f, demand=checked[f.name], within_pace=not checked[f.name].holds) if f.name in checked else f
        for f in figures
    )


def evaluate(
    snapshot: Snapshot | None,
    asking: Asking,
    now: datetime,
    *,
    reserve_margin_pct: float = 0.0,
) -> Decision:
    """Decide whether `asking` may take a turn now. Pure: same inputs, same Decision.

    `reserve_margin_pct` widens both reserves (the ceiling sweep resumes a paused session only
    inside reserve + RESUME_MARGIN_PCT, because interrupting it again costs a lost tool call).
    """
    if snapshot is None:
        return _allow(Reason.UNAVAILABLE, error="no snapshot could be built")
    if not asking.is_spot:
        return _allow(Reason.PRIORITY, snapshot)
    if not snapshot.policy.gating_enabled:
        return _allow(Reason.GATING_DISABLED, snapshot)
    if not asking.spends_quota:
        return _allow(Reason.NO_QUOTA, snapshot)
    if not snapshot.windows:
        return _allow(Reason.NO_SNAPSHOT, snapshot)

    quota_fleet = [t for t in snapshot.fleet if t.spends_quota]
    others = [t for t in quota_fleet if t.session_id != asking.session_id]
    # Neither priority work nor the asking session itself is "spot work in flight".
    spot_in_flight = sum(1 for t in others if t.is_spot)
    waiver = spot_in_flight == 0
    fleet_burn = sum(t.burn_per_min for t in others)
    own_burn = asking.burn_per_min
    accruing = fleet_burn + (own_burn if asking.already_running else 0.0)

    live = [live_window(w, now) for w in snapshot.windows]
    reserves = {w.name: min(snapshot.policy.reserve_pct(w.name) + reserve_margin_pct, 100.0) for w in live}
    unneeded = pace_unneeded(
        live, {w.name: snapshot.policy.reserve_pct(w.name) for w in live}, now, margin_pct=reserve_margin_pct
    )
    figures = _demand_aware(tuple(
        _figures(
            w, reserves[w.name],
            _Asked(fleet_burn, own_burn, waiver, w.name in unneeded, accruing, snapshot.policy.overage_spot), now,
        )
        for w in live
    ), snapshot, now)
    counted = quota_fleet if asking.already_running else others
    running = len(counted)
    load = sum(max(t.weight, 0.0) for t in counted)
    slots = snapshot.effective_slots
    budget = budget_for(slots, asking.capacity, asking.capacity_multiplier)
    slot_free = asking.already_running or fits(load, asking.weight, budget)
    spent = tuple(f.name for f in figures if not f.within_cap)
    paced = tuple(f.name for f in figures if not f.within_pace)
    own_exceeds = any(
        f.calibrated and f.sustainable_rate is not None and own_burn > f.sustainable_rate for f in figures
    )
    common = dict(
        budget_spent_windows=spent,
        paced_windows=paced,
        waiver_applied=waiver,
        windows=figures,
        fleet_running=running,
        fleet_load=load,
        spot_in_flight=spot_in_flight,
        slots=slots,
        slot_budget=budget,
        own_weight=asking.weight,
        configured_max=snapshot.policy.effective_max,
        slots_unreachable=snapshot.slots_unreachable,
        own_burn=own_burn,
        own_exceeds_curve=own_exceeds,
        reserve_margin_pct=reserve_margin_pct,
        pool=snapshot.pool,
        demand_pacing=snapshot.policy.demand_pacing,
    )
    if spent:
        return Decision(False, Reason.AT_UTILIZATION_LIMIT, Ceiling.SPOT_BUDGET, **common)
    if paced:
        return Decision(False, Reason.AT_UTILIZATION_LIMIT, Ceiling.PACING_CURVE, **common)
    if not slot_free:
        return Decision(False, Reason.FLEET_AT_CAP, Ceiling.FLEET_CAP, **common)
    return Decision(True, Reason.WITHIN_LIMITS, None, **common)


def decide(snapshot: Snapshot | None, asking: Asking, now: datetime, **kw: float) -> Decision:
    """`evaluate`, failing open on any error: a monitoring gap must not become an outage."""
    try:
        return evaluate(snapshot, asking, now, **kw)
    except Exception as exc:  # noqa: BLE001 — the whole point is that nothing escapes
        return Decision(True, Reason.UNAVAILABLE, error=f"{type(exc).__name__}: {exc}")
