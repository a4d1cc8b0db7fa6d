"""The quota windows and the fleet as `/metrics` families, one unit per family, named in it.

A window's figures are dollars once it is calibrated and fractions of its capacity before, and a
series must not change its unit with a label, so each figure is two families: `..._usd` (only
calibrated windows have it) and `..._ratio` (every window: the figure over the capacity, 0 to 1,
negative past it for what is left). Rates are per second, as Prometheus' base unit wants; the
gate's own figures are per minute and are divided here. Described in docs/metrics.md.
"""

from __future__ import annotations

from datetime import datetime

from prometheus_client.core import GaugeMetricFamily, Metric

from scheduler.front import GateCard, WindowFigures

# What each figure is, by WindowFigures' field: its family's name stem and its help.
FIGURES = {
    "spent": "Spent in the quota window so far",
    "capacity": "The quota window's capacity",
    "reserved": "The priority reserve spot work may not spend",
    "spot_budget": "Capacity less the reserve: spot work's budget",
    "spot_left": "Spot budget not yet spent (negative past it)",
}
RATIO_FIGURES = ("spent", "reserved", "spot_budget", "spot_left")  # a capacity over itself is always 1


def _gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=["window"] if labels is None else labels)


def window_families(card: GateCard, now: datetime) -> list[Metric]:
    usd = {key: _gauge(f"pacer_window_{key}_usd", f"{doc}, in dollars (calibrated windows)")
           for key, doc in FIGURES.items()}
    ratio = {key: _gauge(f"pacer_window_{key}_ratio", f"{FIGURES[key]}, as a fraction of the capacity")
             for key in RATIO_FIGURES}
    burn = _gauge("pacer_window_fleet_burn_usd_per_second",
                  "The running fleet's burn against the window, in dollars per second (calibrated windows)")
    pace_usd = _gauge("pacer_window_sustainable_rate_usd_per_second",
                      "Spot budget left over time left, the pacing curve's rate, in dollars per second")
    pace_ratio = _gauge("pacer_window_sustainable_rate_ratio_per_second",
                        "Spot budget left over time left, the pacing curve's rate, in capacity per second")
    resets = _gauge("pacer_window_time_to_reset_seconds", "Seconds until the window rolls over")
    measured = _gauge("pacer_window_measured", "1: the provider's own figures; 0: the ledger's estimate stands in, "
                      "and why", ["window", "by"])
    for w in card.decision.windows:
        _add_window(w, usd, ratio, burn, pace_usd, pace_ratio)
        resets.add_metric([w.name], max(0.0, (w.resets_at - now).total_seconds()))
        if w.measured_by or w.fallback:  # only a source that says (agents)
            measured.add_metric([w.name, w.measured_by or f"ledger:{w.fallback}"], 1.0 if w.measured_by else 0.0)
    return [*usd.values(), *ratio.values(), burn, pace_usd, pace_ratio, resets, measured]


def _add_window(w: WindowFigures, usd: dict[str, GaugeMetricFamily], ratio: dict[str, GaugeMetricFamily],
                burn: GaugeMetricFamily, pace_usd: GaugeMetricFamily, pace_ratio: GaugeMetricFamily) -> None:
    if w.calibrated:
        for key, family in usd.items():
            family.add_metric([w.name], float(getattr(w, key)))
        if w.fleet_burn is not None:
            burn.add_metric([w.name], float(w.fleet_burn) / 60)
        if w.sustainable_rate is not None:
            pace_usd.add_metric([w.name], float(w.sustainable_rate) / 60)
    if w.capacity > 0:
        for key, family in ratio.items():
            family.add_metric([w.name], float(getattr(w, key)) / w.capacity)
        if w.sustainable_rate is not None:
            pace_ratio.add_metric([w.name], float(w.sustainable_rate) / w.capacity / 60)


def fleet_families(card: GateCard) -> list[Metric]:
    fleet = _gauge("pacer_fleet_running", "Turns a worker is executing now, by class", ["class"])
    fleet.add_metric(["priority"], card.running_priority)
    fleet.add_metric(["spot"], card.running_spot)
    slots = _gauge("pacer_fleet_slots", "Slots the fleet may fill (max_sessions within the worker pool)", [])
    slots.add_metric([], card.snapshot.effective_slots)
    burn = _gauge("pacer_fleet_burn_usd_per_second", "What the running turns that spend quota burn, per second", [])
    burn.add_metric([], sum(t.burn_per_min for t in card.snapshot.fleet if t.spends_quota) / 60)
    return [fleet, slots, burn]
