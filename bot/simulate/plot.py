"""`--plot`: an image of one run, or of each policy side by side with `--compare` (a column per
policy, each row on one scale so the columns compare at a glance):

- a panel per quota window: the spend the gate saw in the current window (a shaded area) against
  the pacing curve (dashed, drawn over it: under Pacer the two coincide by design, so the area
  keeps both visible), the non-reserved budget line and the capacity;
- the fleet: running sessions by class against the slots on the left axis, and the waiting
  (held, paused) on the right axis, since a backlog is often ten times the slots; the minutes in
  which the budget binds — a window's cap or its pace — are shaded, so slots standing free while
  sessions wait read as what they are (the pace only under a policy that paces: `pacer` with its
  gate; the baselines have none);
- what binds: of the minutes spot work waited, how many every slot was taken, how many a
  window's cap or pace bound (by window), and how many neither — with the binding window's spend
  by rollover.

Each row's legend stands in a column of its own at the right, beside the panels, so it covers
none of their data however the run falls.

The figure is drawn without pyplot and written by matplotlib's Agg renderer, so no display is
needed. matplotlib is the optional extra `plot` of this project (installed with `dev` too): a
chatops server does not need a plotting stack, and `pacer simulate` without --plot never imports it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from templates import environment, error_text

if TYPE_CHECKING:
    from bot.simulate.engine import Run
    from bot.simulate.trace import Sample

HEADROOM = 1.15  # each panel's scale runs this far above its data (the legends stand beside the panels)
LEGEND_WIDTH = 0.5  # the legend column's width, as a share of one policy's column
CLIP = 2.0  # a window panel's scale stops at this many times the capacity: past that, a run is just "far over"


def _say(name: str, **values: Any) -> str:
    """A phrase of text/simulate_plot.j2."""
    return str(getattr(environment().get_template("text/simulate_plot.j2").module, name)(**values)).strip()


def require_matplotlib() -> str | None:
    """None when plotting can work, else what to install."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return error_text("simulate/matplotlib_missing")
    return None


def check_plot_path(path: str) -> str | None:
    """None when the image can be written at `path`, else the one-line reason — checked before a
    run, so a bad path costs no simulation and leaves nothing behind."""
    from matplotlib.figure import Figure

    target = Path(path)
    formats = sorted(Figure().canvas.get_supported_filetypes())
    suffix = target.suffix[1:].lower()
    if target.is_dir():
        problem = "directory"
    elif not target.parent.is_dir():
        problem = "no_parent"
    elif not os.access(target.parent, os.W_OK):
        problem = "read_only"
    elif suffix and suffix not in formats:
        problem = "format"
    else:
        return None
    return error_text("simulate/plot_unwritable", path=path, problem=problem, parent=str(target.parent),
                      suffix=target.suffix, formats=formats)


@dataclass
class Waiting:
    """What kept spot work waiting, counted in simulated minutes (one sample each)."""

    minutes: int = 0
    waited: int = 0
    slots_full: int = 0
    cap: dict[str, int] = field(default_factory=dict)  # by the first window without room
    pace: dict[str, int] = field(default_factory=dict)  # by the first window whose curve it outran
    idle: int = 0
    other: int = 0
    paced: bool = True  # whether the policy has a pace at all (the baselines do not)


def paces(run: Run) -> bool:
    """Whether the run's policy has a pacing curve: `pacer` with its gate on. fifo holds only for
    slots and flat-target on its flat target, so for them the pace is no reason for anything."""
    return run.policy == "pacer" and run.scenario.policy.gating


def what_binds(samples: list[Sample], slots: int, *, paced: bool = True) -> Waiting:
    """Each minute spot work waited, the first of: every slot taken (then more budget would not
    start anything), a window's cap, a window's pace (only where the policy paces); else neither —
    idle while holding, or waiting for a re-check while other spot work runs."""
    out = Waiting(minutes=len(samples), paced=paced)
    for s in samples:
        if s.spot_waiting <= 0:
            continue
        out.waited += 1
        if s.running_spot + s.running_priority >= slots:
            out.slots_full += 1
        elif s.budget_binds is not None:
            out.cap[s.budget_binds] = out.cap.get(s.budget_binds, 0) + 1
        elif paced and s.pace_binds is not None:
            out.pace[s.pace_binds] = out.pace.get(s.pace_binds, 0) + 1
        elif s.idle_while_holding:
            out.idle += 1
        else:
            out.other += 1
    return out


def _pace(samples: list[Sample], name: str, spot_budget: float) -> list[float]:
    """Where spend would be on the pacing curve: the straight line from the window's start to
    the non-reserved budget at its rollover (the rate the curve sustains from an empty window)."""
    out = []
    for s in samples:
        w = s.windows[name]
        span = (w.resets_at - w.window_start).total_seconds()
        out.append(spot_budget * (s.at - w.window_start).total_seconds() / span if span > 0 else 0.0)
    return out


def _window_panel(ax: Any, run: Run, samples: list[Sample], name: str) -> None:
    times = [s.at for s in samples]
    capacity = samples[0].windows[name].capacity
    reserve = run.scenario.policy.reserve_pct(name)
    spot_budget = capacity * (1 - reserve / 100.0)
    spent = [s.windows[name].spent for s in samples]
    ax.fill_between(times, spent, color="tab:blue", alpha=0.3, lw=0)
    ax.plot(times, spent, color="tab:blue", lw=1.0, label=_say("spent"))
    ax.plot(
        times, _pace(samples, name, spot_budget), color="black", lw=0.8, ls=(0, (4, 3)), zorder=3, label=_say("curve")
    )
    ax.axhline(spot_budget, color="tab:orange", lw=1.4, label=_say("budget_line", reserve_pct=reserve))
    ax.axhline(capacity, color="tab:red", lw=0.8, ls=":", label=_say("capacity"))
    ax.set_title(_say("window_title", policy=run.policy, window=name), fontsize=10)
    ax.set_ylabel(_say("dollars"))
    ax.grid(alpha=0.3)


def _fleet_panel(ax: Any, run: Run, samples: list[Sample], waiting_top: float) -> list[tuple[Any, str]]:
    """Draw the fleet; its legend's entries (the left axis's and the right's)."""
    times = [s.at for s in samples]
    slots = min(run.scenario.policy.max_sessions, run.scenario.policy.agent_workers)
    ax.fill_between(times, 0, 1, where=[s.budget_binds is not None for s in samples], step="post",
                    transform=ax.get_xaxis_transform(), color="tab:orange", alpha=0.2, lw=0, label=_say("cap_binds"))
    if paces(run):  # a baseline has no pace: nothing of it to shade
        ax.fill_between(
            times,
            0,
            1,
            where=[s.budget_binds is None and s.pace_binds is not None for s in samples],
            step="post",
            transform=ax.get_xaxis_transform(),
            color="tab:olive",
            alpha=0.2,
            lw=0,
            label=_say("pace_binds"),
        )
    ax.fill_between(times, 0, 1, where=[s.idle_while_holding for s in samples], step="post",
                    transform=ax.get_xaxis_transform(), color="tab:red", alpha=0.35, lw=0, label=_say("idle"))
    ax.stackplot(times, [s.running_priority for s in samples], [s.running_spot for s in samples],
                 colors=["tab:purple", "tab:cyan"], alpha=0.7, labels=[_say("running_priority"), _say("running_spot")])
    ax.axhline(slots, color="black", lw=0.9, ls="--", label=_say("slots", count=slots))
    ax.set_ylim(0, slots * HEADROOM + 1)
    ax.set_ylabel(_say("running_axis"))
    ax.set_title(_say("fleet_title", policy=run.policy), fontsize=10)
    ax.grid(alpha=0.3)
    waiting = ax.twinx()
    waiting.plot(times, [s.held for s in samples], color="tab:gray", lw=1, label=_say("held"))
    waiting.plot(times, [s.paused for s in samples], color="tab:brown", lw=1, label=_say("paused"))
    waiting.set_ylim(0, waiting_top * HEADROOM)
    waiting.set_ylabel(_say("waiting_axis"))
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = waiting.get_legend_handles_labels()
    return list(zip(handles + more, labels + more_labels))


def _legend(ax: Any, entries: list[tuple[Any, str]]) -> None:
    """A row's legend, alone in the legend column: beside the panels, over none of their data."""
    ax.axis("off")
    if entries:
        handles, labels = zip(*entries)
        ax.legend(handles, labels, loc="upper left", fontsize=7, frameon=False, borderaxespad=0.0)


def _binds_panel(ax: Any, run: Run, samples: list[Sample], report: dict[str, Any]) -> None:
    slots = min(run.scenario.policy.max_sessions, run.scenario.policy.agent_workers)
    w = what_binds(samples, slots, paced=paces(run))
    text = _say("binds", waiting=w, report=report)
    ax.axis("off")
    ax.set_title(_say("binds_title", policy=run.policy), fontsize=10, loc="left")
    ax.text(0.0, 1.0, text, transform=ax.transAxes, va="top", ha="left", fontsize=8)


def plot_runs(runs: list[Run], reports: list[dict[str, Any]], path: str) -> None:
    """Draw each run (with its score) in a column of its own and write the image to `path`: in
    the format its ending names, PNG when it names none (matplotlib would add ".png" to the name)."""
    figure(runs, reports).savefig(path, dpi=90, format=Path(path).suffix[1:].lower() or "png")


def figure(runs: list[Run], reports: list[dict[str, Any]]) -> Any:
    """The matplotlib Figure of `plot_runs`, drawn without pyplot (so nothing global holds it)."""
    import matplotlib.dates as mdates
    from matplotlib.figure import Figure

    scenario = runs[0].scenario
    traces = [[s for s in run.trace.samples if s.windows] for run in runs]
    names = [w.name for w in scenario.windows if traces[0] and w.name in traces[0][0].windows]
    rows, cols = len(names) + 2, len(runs)
    fig = Figure(figsize=(max(13.0, 7.0 * cols) + 7.0 * LEGEND_WIDTH, 3.3 * len(names) + 6.0), layout="constrained")
    grid = fig.subplots(
        rows,
        cols + 1,
        sharex="col",
        squeeze=False,
        gridspec_kw={"height_ratios": [3.0] * len(names) + [3.0, 1.5], "width_ratios": [1.0] * cols + [LEGEND_WIDTH]},
    )
    axes, keys = grid[:, :cols], grid[:, cols]
    waiting_top = max((max(s.held, s.paused) for samples in traces for s in samples), default=0) * 1.1 + 1
    fleet_entries: dict[str, tuple[Any, str]] = {}
    for col, (run, report, samples) in enumerate(zip(runs, reports, traces)):
        for row, name in enumerate(names):
            _window_panel(axes[row, col], run, samples, name)
        for handle, label in _fleet_panel(axes[-2, col], run, samples, waiting_top):
            fleet_entries.setdefault(label, (handle, label))  # a baseline's column adds no pace
        axes[-2, col].set_xlabel(_say("time_axis"))
        locator = mdates.AutoDateLocator(maxticks=8)  # type: ignore[no-untyped-call]
        axes[-2, col].xaxis.set_major_locator(locator)
        axes[-2, col].xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
        axes[-2, col].tick_params(axis="x", labelbottom=True)  # the panel below it is text
        _binds_panel(axes[-1, col], run, samples, report)
    for row, name in enumerate(names):  # one dollar scale per window, so the columns compare
        capacity = traces[0][0].windows[name].capacity
        top = min(max(ax.get_ylim()[1] for ax in axes[row]), capacity * CLIP) * HEADROOM
        for ax in axes[row]:
            ax.set_ylim(0, top)
        _legend(keys[row], list(zip(*axes[row, 0].get_legend_handles_labels())))
    _legend(keys[-2], list(fleet_entries.values()))
    _legend(keys[-1], [])
    fig.suptitle(_say("suptitle", scenario=scenario.name, policies=[run.policy for run in runs]))
    return fig
