"""Scoring a run against seed 001's promise: "A deployment sitting idle should be idle because it
has genuinely spent its budget, never because the gate was being careful."

Spend is scored on the provider's truth — each turn's burn, minute by minute, wherever it fell
— not on the ledger the gate reads (which prices a finished turn at its reported cost, split at
a window's start pro rata by time, and a running one at its runtime's rate). Everything comes back as plain data:
`score(run)` is the report `--json` writes and the text template prints.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from bot.simulate.engine import Run
from bot.simulate.provider import Past, outside_by_minute, over_share, provider_report
from bot.simulate.scenario import Scenario
from scheduler.front import CEILING_SWEEP, HOLD_SWEEP, PREEMPTION_COOLDOWN, detect_cycling, window_bounds
from scheduler.wiring import PERIODIC

MINUTE = timedelta(minutes=1)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0-100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(math.ceil(q / 100.0 * len(ordered)), 1)
    return ordered[min(rank, len(ordered)) - 1]


def sweep_interval() -> timedelta:
    return PERIODIC.get(CEILING_SWEEP, PERIODIC.get(HOLD_SWEEP, timedelta(minutes=5)))


def spend_by_minute(run: Run) -> tuple[list[float], list[float]]:
    """Dollars spent in each simulated minute by quota-spending turns: (all, spot)."""
    scenario = run.scenario
    n = int((run.end - scenario.start) / MINUTE) + 1
    total, spot = [0.0] * n, [0.0] * n
    for span in run.pool.spans.values():
        if not span.spends_quota or span.burn_per_min <= 0:
            continue
        a = (span.started - scenario.start) / MINUTE
        b = ((span.ended or run.end) - scenario.start) / MINUTE
        is_spot = run.tracked[span.session_id].scheduling_class == "spot" if span.session_id in run.tracked else False
        m = int(a)
        while m < b and m < n:
            part = span.burn_per_min * (min(b, m + 1) - max(a, m))
            total[m] += part
            if is_spot:
                spot[m] += part
            m += 1
    return total, spot


def binding_window(scenario: Scenario) -> str:
    """The window whose non-reserved budget runs out first at a steady burn: the lowest
    sustainable rate (spot budget / period)."""
    def rate(name: str) -> float:
        w = scenario.window(name)
        sustainable = scenario.budget(name) * (1 - scenario.policy.reserve_pct(name) / 100.0) / (w.period / MINUTE)
        if w.reported_by is None:
            return sustainable
        return sustainable - w.outside_usd(scenario.start, scenario.end) / (scenario.duration / MINUTE)

    return min((w.name for w in scenario.windows), key=rate)


def windows_report(run: Run, total: list[float], spot: list[float]) -> dict[str, Any]:
    scenario = run.scenario
    out: dict[str, Any] = {}
    for w in scenario.windows:
        capacity = scenario.budget(w.name)
        spot_budget = capacity * (1 - scenario.policy.reserve_pct(w.name) / 100.0)
        instances: list[dict[str, Any]] = []
        outside = outside_by_minute(w, scenario.start, run.end, len(total)) if w.reported_by else None
        begin, reset = window_bounds(w.first_reset, w.period, scenario.start)
        while begin < run.end:
            lo = max(int((begin - scenario.start) / MINUTE), 0)
            hi = min(int((reset - scenario.start) / MINUTE), len(total))
            cum = over_spot = over_priority = 0.0
            breaches, in_breach = 0, False
            past = Past()
            for m in range(lo, hi):
                if outside is not None:  # the provider counts what others spend on the account too
                    past.minute(cum, total[m], spot[m], outside[m], capacity)
                    before, cum = cum, cum + total[m] + outside[m]
                    share = over_share(before, cum, total[m] + outside[m], spot_budget)
                else:
                    before, cum = cum, cum + total[m]
                    share = (
                        1.0
                        if before >= spot_budget
                        else ((cum - spot_budget) / total[m] if cum > spot_budget and total[m] > 0 else 0.0)
                    )
                spot_part = spot[m] * share
                over_spot += spot_part
                over_priority += (total[m] - spot[m]) * share
                if spot_part > 1e-9 and not in_breach:
                    breaches += 1
                in_breach = spot_part > 1e-9
            whole = begin >= scenario.start and reset <= run.end
            instances.append(
                {
                    "start": begin.isoformat(),
                    "reset": reset.isoformat(),
                    "complete": whole,
                    "spent_usd": round(cum, 2),
                    "spent_pct_of_nonreserved": round(100.0 * cum / spot_budget, 2) if spot_budget else 0.0,
                    "spot_overshoot_usd": round(over_spot, 2),
                    "priority_in_reserve_usd": round(over_priority, 2),
                    "breaches": breaches,
                    **(past.instance() if outside is not None else {}),
                }
            )
            begin, reset = reset, reset + w.period
        complete = [i for i in instances if i["complete"]]
        pcts = [i["spent_pct_of_nonreserved"] for i in complete]
        out[w.name] = {
            "capacity_usd": round(capacity, 2), "nonreserved_usd": round(spot_budget, 2),
            "reserve_pct": scenario.policy.reserve_pct(w.name),
            "rollovers": len(complete),
            "min_spent_pct": min(pcts) if pcts else None,
            "mean_spent_pct": round(sum(pcts) / len(pcts), 2) if pcts else None,
            # Spend past the line is the reserve, not more of the budget: capped, this is how much of
            # the non-reserved budget was put to use.
            "mean_used_pct": round(sum(min(p, 100.0) for p in pcts) / len(pcts), 2) if pcts else None,
            "breaches": sum(i["breaches"] for i in instances),
            "spot_overshoot_usd": round(sum(i["spot_overshoot_usd"] for i in instances), 2),
            "max_spot_overshoot_usd": max((i["spot_overshoot_usd"] for i in instances), default=0.0),
            "instances": instances,
        }
        if w.reported_by is not None:
            out[w.name].update(provider_report(run.pool.meter, run.gate_by_window, w, instances))
    return out


def idle_report(run: Run) -> dict[str, Any]:
    episodes: list[int] = []
    current = 0
    for s in run.trace.samples:
        if s.idle_while_holding:
            current += 1
        elif current:
            episodes.append(current)
            current = 0
    if current:
        episodes.append(current)
    return {"minutes": sum(episodes), "episodes": len(episodes), "longest_minutes": max(episodes, default=0),
            "freed_slots": run.pool.ended_quota_turns}


def waits_report(run: Run) -> dict[str, Any]:
    priority: list[float] = []
    priority_unstarted = 0
    spot: dict[str, list[float]] = defaultdict(list)
    spot_unstarted: dict[str, int] = defaultdict(int)
    for item in run.pool.work.items.values():
        track = run.tracked.get(item.session_id)
        if track is None or item.turn < 0:
            continue  # a reply to a busy session waits on its turn, not on the gate
        started = item.started_at
        wait = ((started or run.end) - item.submitted_at) / MINUTE
        if track.scheduling_class == "priority":
            priority.append(wait)
            priority_unstarted += started is None
        elif item.turn == 0:
            spot[track.demand.genesis].append(wait)
            spot_unstarted[track.demand.genesis] += started is None
    everyone = [w for v in spot.values() for w in v]
    return {
        "spot_wait_all_minutes": {
            "p50": round(percentile(everyone, 50), 1),
            "p95": round(percentile(everyone, 95), 1),
            "max": round(max(everyone, default=0.0), 1),
            "sessions": len(everyone),
            "not_started": sum(spot_unstarted.values()),
        },
        "priority_start_delay_minutes": {
            "max": round(max(priority, default=0.0), 2),
            "p99": round(percentile(priority, 99), 2),
            "turns": len(priority),
            "not_started": priority_unstarted,
        },
        "spot_wait_minutes": {
            g: {
                "p50": round(percentile(v, 50), 1),
                "p95": round(percentile(v, 95), 1),
                "max": round(max(v), 1),
                "sessions": len(v),
                "not_started": spot_unstarted[g],
            }
            for g, v in sorted(spot.items())
        },
    }


def interruptions_report(run: Run) -> dict[str, Any]:
    paused = halted = slept = 0
    resumed = run.notices.get("resumed", 0)  # by the sweep or by a queue pass (the front of the queue)
    for report in run.sweeps:
        paused += len(getattr(report, "paused", []))
        marks = getattr(report, "marks", None)
        halted += len(getattr(marks, "halted", [])) if marks is not None else 0
        slept += len(getattr(marks, "slept", [])) if marks is not None else 0
    released = set(run.released_marks)
    by_session: dict[int, list[datetime]] = defaultdict(list)
    repreempted = 0
    for sid, at in sorted(run.marks, key=lambda m: m[1]):
        taken = [t for t in by_session[sid] if (sid, t) not in released]
        if taken and at - taken[-1] < PREEMPTION_COOLDOWN:
            repreempted += 1
        by_session[sid].append(at)
    return {"pauses": paused, "resumes": resumed, "preemptions": len(run.marks), "preemptions_released": len(released),
            "preemptions_halted": halted, "preemptions_slept": slept, "repreemptions_inside_cooldown": repreempted}


def cycling_report(run: Run) -> dict[str, Any]:
    """`cycling.detect` read at every preemption of the run: the sessions and pairs that were
    cycling at any moment, the most preemptions one session took in a day, and the cost lost to
    halted turns, in all and by the preemptions that made a session or a pair cycle."""
    events = run.preemption_events
    sessions: set[int] = set()
    pairs: set[tuple[int, int]] = set()
    cycling_events: set[int] = set()
    worst = 0
    for at in sorted({e.at for e in events}):
        found = detect_cycling(events, at)
        ids = {s.session_id for s in found.sessions}
        keys = {(p.first_id, p.second_id) for p in found.pairs}
        sessions |= ids
        pairs |= keys
        worst = max([worst, *(s.preemptions for s in found.sessions)])
        for i, e in enumerate(events):
            key = (min(e.session_id, e.by_id or 0), max(e.session_id, e.by_id or 0))
            if found.since < e.at <= at and (e.session_id in ids or key in keys):
                cycling_events.add(i)
    return {
        "cycling_sessions": len(sessions), "cycling_pairs": len(pairs), "cycling_most_in_a_day": worst,
        "preemption_lost_usd": round(sum(e.cost_lost_usd for e in events), 2),
        "cycling_lost_usd": round(sum(events[i].cost_lost_usd for i in cycling_events), 2),
    }


def forecast_report(run: Run) -> dict[str, Any]:
    """Each waiting arrival's forecast (`bot/simulate/forecasting.py`) against its first start: the
    error of the median in minutes, and the share of starts inside the range."""
    started = {i.session_id: i.started_at for i in run.pool.work.items.values() if i.turn == 0 and i.started_at}
    errors: list[float] = []
    inside = none = unstarted = 0
    for sid, made in run.forecasts.items():
        actual = started.get(sid)
        if made is None or actual is None:
            none += made is None
            unstarted += made is not None
            continue
        errors.append(abs((made.median - actual) / MINUTE))
        inside += made.low <= actual and (made.high is None or actual <= made.high)
    return {
        "forecasts": len(run.forecasts), "scored": len(errors), "no_forecast": none, "not_started": unstarted,
        "error_p50_minutes": round(percentile(errors, 50), 1), "error_p90_minutes": round(percentile(errors, 90), 1),
        "inside_range_pct": round(100.0 * inside / len(errors), 1) if errors else None,
    }


def score(run: Run) -> dict[str, Any]:
    scenario = run.scenario
    total, spot = spend_by_minute(run)
    windows = windows_report(run, total, spot)
    binding = binding_window(scenario)
    states: dict[str, int] = defaultdict(int)
    for state in run.states.values():
        states[state.split(":")[0]] += 1
    lost = {sid: s for sid, s in run.states.items() if s.startswith("lost")}
    simulated = (run.end - scenario.start).total_seconds()
    slots = min(scenario.policy.max_sessions, scenario.policy.agent_workers)
    max_burn = max((r.burn_usd_per_min for r in scenario.runtimes if r.spends_quota), default=0.0)
    interval = sweep_interval()
    report = {
        "scenario": scenario.name,
        "policy": run.policy,
        "start": scenario.start.isoformat(),
        "end": run.end.isoformat(),
        "sessions": len(run.tracked),
        "turns": len(run.pool.spans),
        "spent_usd": round(sum(total), 2),
        "spot_spent_usd": round(sum(spot), 2),
        "binding_window": binding,
        "windows": windows,
        "idle_while_holding": idle_report(run),
        **waits_report(run),
        "rechecks": run.jobs.get("recheck", 0),
        "jobs": dict(sorted(run.jobs.items())),
        **interruptions_report(run),
        "cycling": cycling_report(run),
        "cost_caps": dict(run.cost_caps),
        "forecast": forecast_report(run) if run.forecasted else None,  # `pacer simulate --forecasts`
        "states": dict(sorted(states.items())),
        "lost": len(lost),
        "lost_sessions": {str(k): v for k, v in sorted(lost.items())[:20]},
        "sweep_interval_minutes": interval / MINUTE,
        "one_sweep_of_fleet_burn_usd": round(slots * max_burn * (interval / MINUTE), 2),
        "wall_seconds": round(run.wall_seconds, 2),
        "cpu_seconds": round(run.cpu_seconds, 2),
        "simulated_seconds_per_wall_second": round(simulated / run.wall_seconds, 1) if run.wall_seconds > 0 else None,
        "quota_reads": getattr(run.pool.meter, "reads", 0),
        "wall_seconds_by_part": {k: round(v, 2) for k, v in sorted(run.timings.items(), key=lambda kv: -kv[1])},
    }
    report["checks"] = checks(report)
    return report


def checks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The acceptance bars, each with the number it was judged on."""
    binding = report["windows"][report["binding_window"]]
    bound = report["one_sweep_of_fleet_burn_usd"]
    idle = report["idle_while_holding"]
    interval = report["sweep_interval_minutes"]
    return {
        "binding_window_spends_95pct": {
            "value": binding["min_spent_pct"],
            "ok": binding["min_spent_pct"] is not None and binding["min_spent_pct"] >= 95.0,
        },
        "spot_overshoot_within_one_sweep": {
            "value": binding["max_spot_overshoot_usd"],
            "bound": bound,
            "ok": all(w["max_spot_overshoot_usd"] <= bound for w in report["windows"].values()),
        },
        "idle_while_holding_within_one_sweep_per_freed_slot": {
            "value": idle["longest_minutes"],
            "bound": interval,
            "ok": idle["longest_minutes"] <= interval,
        },
        "no_lost_sessions": {"value": report["lost"], "ok": report["lost"] == 0},
        "priority_start_delay_zero": {
            "value": report["priority_start_delay_minutes"]["max"],
            "ok": report["priority_start_delay_minutes"]["max"] == 0,
        },
    }
