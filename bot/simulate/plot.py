"""`--plot`: a PNG timeline of one run — a panel per quota window (the spend the gate saw in the
current window against the pacing curve, the non-reserved line and the capacity), and a panel
of the fleet (running sessions by class, held and paused counts).

matplotlib is the optional extra `plot` of this project (installed with `dev` too): a chatops server does
not need a plotting stack, and `pacer simulate` without --plot never imports it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.simulate.engine import Run


def require_matplotlib() -> str | None:
    """None when plotting can work, else what to install."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        # Not the extra by the package's name: the `pacer` on the package index is an unrelated project.
        return "matplotlib is not installed; install it with `pip install matplotlib` (or `pip install -e '.[plot]'` in Pacer's checkout)"
    return None


def _pace(samples: list[Any], name: str, spot_budget: float) -> list[float]:
    """Where spend would be on the pacing curve: the straight line from the window's start to
    the non-reserved budget at its rollover (the rate the curve sustains from an empty window)."""
    out = []
    for s in samples:
        w = s.windows[name]
        span = (w.resets_at - w.window_start).total_seconds()
        out.append(spot_budget * (s.at - w.window_start).total_seconds() / span if span > 0 else 0.0)
    return out


def plot_run(run: Run, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    scenario = run.scenario
    samples = [s for s in run.trace.samples if s.windows]
    names = [w.name for w in scenario.windows if samples and w.name in samples[0].windows]
    times: list[datetime] = [s.at for s in samples]
    fig, axes = plt.subplots(len(names) + 1, 1, figsize=(13, 3.4 * (len(names) + 1)), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        capacity = samples[0].windows[name].capacity
        spot_budget = capacity * (1 - scenario.policy.reserve_pct(name) / 100.0)
        ax.plot(times, [s.windows[name].spent for s in samples], color="tab:blue", lw=1.2, label="spent in window (gate's view)")
        ax.plot(times, _pace(samples, name, spot_budget), color="tab:green", lw=1, ls="--", label="pacing curve (even spend to the non-reserved budget)")
        ax.axhline(spot_budget, color="tab:orange", lw=1.2, label=f"non-reserved budget (reserve {scenario.policy.reserve_pct(name):g}%)")
        ax.axhline(capacity, color="tab:red", lw=0.8, ls=":", label="window capacity")
        ax.set_ylabel("dollars")
        ax.set_title(f"{name} window — {run.policy}: spend against the pacing curve and the reserve line")
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
    fleet = axes[-1, 0]
    fleet.stackplot(times, [s.running_priority for s in samples], [s.running_spot for s in samples],
                    colors=["tab:purple", "tab:cyan"], alpha=0.6, labels=["running priority", "running spot"])
    fleet.plot(times, [s.held for s in samples], color="tab:gray", lw=1, label="held")
    fleet.plot(times, [s.paused for s in samples], color="tab:red", lw=1, label="paused or marked")
    slots = min(scenario.policy.max_sessions, scenario.policy.agent_workers)
    fleet.axhline(slots, color="black", lw=0.8, ls="--", label=f"slots ({slots})")
    fleet.set_ylabel("sessions")
    fleet.set_xlabel("simulated time (UTC)")
    fleet.set_title("fleet: running sessions by class, held and paused")
    fleet.legend(loc="upper left", fontsize=8, ncol=3)
    fleet.grid(alpha=0.3)
    fleet.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))  # type: ignore[no-untyped-call]
    fig.suptitle(f"pacer simulate: {scenario.name} under {run.policy}")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
