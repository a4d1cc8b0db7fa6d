"""`pacer simulate --plot`: a column per policy with --compare, the panel saying what binds, and a
bad image path refused in one line before anything runs (docs/simulate.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.simulate.trace import Sample

pytest.importorskip("matplotlib")

TINY = """
[simulation]
start = "2026-11-02T00:00:00Z"
duration = "50m"
seed = 3

[policy]
max_sessions = 2

[[windows]]
name = "5h"
period = "5h"
budget_usd = 6
first_reset = "+20m"

[[windows]]
name = "7d"
period = "7d"
budget_usd = 1000
first_reset = "+7d"

[[runtimes]]
name = "claude_code"
burn_usd_per_min = 0.2

[[arrivals]]
at = "+2m"
genesis = "github_label"
duration = "15m"
count = 6
every = "1m"

[[arrivals]]
at = "+10m"
genesis = "command"
duration = "10m"
"""

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


def test_compare_draws_one_column_per_policy_with_what_binds(scenario: Path) -> None:
    from bot.simulate.cli import load_scenario, run_policy
    from bot.simulate.plot import figure
    from bot.simulate.scenario import POLICIES

    loaded = load_scenario(str(scenario))
    scored = [run_policy(loaded, policy) for policy in POLICIES]
    fig = figure([run for _, run in scored], [report for report, _ in scored])
    titles = [ax.get_title(loc) for ax in fig.axes for loc in ("center", "left") if ax.get_title(loc)]
    for policy in POLICIES:
        mine = [t for t in titles if t.startswith(f"{policy} · ")]
        # a panel per window, the fleet, and what binds
        assert mine == [
            f"{policy} · 5h window: spend against the budget line",
            f"{policy} · 7d window: spend against the budget line",
            f"{policy} · fleet: running by class (left), waiting (right)",
            f"{policy} · what binds",
        ]
    binds = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert len(binds) == len(POLICIES) and all("Binding window 5h" in text for text in binds)
    assert fig.get_suptitle() == "pacer simulate: tiny under pacer, fifo, flat-target"


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The --compare figure of the tiny scenario, laid out (as savefig would) without writing it."""
    from bot.simulate.cli import load_scenario, run_policy
    from bot.simulate.plot import figure
    from bot.simulate.scenario import POLICIES

    path = tmp_path_factory.mktemp("compare") / "tiny.toml"
    path.write_text(TINY)
    loaded = load_scenario(str(path))
    scored = [run_policy(loaded, policy) for policy in POLICIES]
    fig = figure([run for _, run in scored], [report for report, _ in scored])
    fig.draw_without_rendering()
    return fig, [run for _, run in scored]


def test_no_legend_covers_a_panels_data(compared: Any) -> None:
    fig, _ = compared
    drawn = [ax for ax in fig.axes if ax.lines or ax.collections or ax.patches]
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 3  # one a row: each window's panels, and the fleet's
    whole = fig.bbox
    for legend in legends:
        box = legend.get_window_extent()
        assert whole.x0 <= box.x0 and box.x1 <= whole.x1 and whole.y0 <= box.y0 and box.y1 <= whole.y1  # not cut off
        covered = [ax.get_title() or ax.get_ylabel() for ax in drawn if box.overlaps(ax.get_window_extent())]
        assert covered == [], f"the legend {[t.get_text() for t in legend.get_texts()][:2]} covers {covered}"


def test_only_a_policy_that_paces_is_shaded_where_the_pace_binds(compared: Any) -> None:
    fig, runs = compared
    pace = "the pace binds: one more would outrun a window's pacing curve"
    shaded = {
        ax.get_title().split(" · ")[0]: pace in [c.get_label() for c in ax.collections]
        for ax in fig.axes
        if " · fleet:" in ax.get_title()
    }
    assert shaded == {"pacer": True, "fifo": False, "flat-target": False}
    [fleet_legend] = [ax.get_legend() for ax in fig.axes if ax.get_legend() and "slots (2)" in
                      [t.get_text() for t in ax.get_legend().get_texts()]]
    assert pace in [t.get_text() for t in fleet_legend.get_texts()]  # pacer's column brings it
    binds = {ax.get_title(loc="left").split(" · ")[0]: ax.texts[0].get_text() for ax in fig.axes if ax.texts}
    assert "the pacing curve:" in binds["pacer"]
    assert "the pacing curve:" not in binds["fifo"] and "the pacing curve:" not in binds["flat-target"]


def test_a_policy_without_a_pace_counts_no_minute_against_it() -> None:
    from bot.simulate.plot import what_binds

    waited = [_sample(0, running=1, pace="7d"), _sample(1, running=1, pace="7d", idle=True)]
    paced, unpaced = what_binds(waited, slots=2), what_binds(waited, slots=2, paced=False)
    assert paced.pace == {"7d": 2} and (paced.other, paced.idle) == (0, 0)
    assert unpaced.pace == {} and (unpaced.other, unpaced.idle) == (1, 1) and not unpaced.paced


def test_the_cli_writes_the_compare_image(scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bot.cli.main import main

    png = tmp_path / "compare.png"
    assert main(["simulate", str(scenario), "--compare", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == PNG
    out, err = capsys.readouterr()
    assert out.endswith(f"plot written to {png} (pacer, fifo, flat-target)\n")
    assert err == ""  # no progress bar when stderr is not a terminal


def test_a_plot_named_without_an_ending_is_a_png_at_that_name(scenario: Path, tmp_path: Path) -> None:
    from bot.cli.main import main

    target = tmp_path / "timeline"
    assert main(["simulate", str(scenario), "--policy", "fifo", "--plot", str(target)]) == 0
    assert target.read_bytes()[:8] == PNG and not (tmp_path / "timeline.png").exists()


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("missing/out.png", "there is no directory {tmp}/missing"),
        (".", "it is a directory"),
        ("out.xyz", ".xyz is not an image format matplotlib writes; end the name with one of ."),
    ],
)
def test_a_bad_plot_path_is_one_line_and_nothing_runs(
    scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, reason: str
) -> None:
    from bot.cli.main import main

    target = tmp_path / where
    before = sorted(tmp_path.rglob("*"))
    assert main(["simulate", str(scenario), "--compare", "--plot", str(target)]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # refused before any simulation: no report
    assert err.count("\n") == 1 and err.startswith(
        f"pacer simulate: --plot: cannot write {target}: {reason.format(tmp=tmp_path)}"
    )
    assert sorted(tmp_path.rglob("*")) == before
    if where.endswith(".xyz"):
        assert ", .png, " in err


def _sample(minute: int, *, waiting: int = 3, running: int = 0, cap: str | None = None, pace: str | None = None,
            idle: bool = False) -> Sample:
    at = datetime(2026, 11, 2, tzinfo=UTC) + timedelta(minutes=minute)
    return Sample(at, running, 0, 0, waiting, 0, waiting, 0.0, idle, {}, cap, pace)


@pytest.mark.parametrize(
    ("sample", "counted"),
    [
        (_sample(0, waiting=0, cap="5h"), "nothing"),  # nobody waited: nothing bound
        (_sample(0, running=2, cap="5h", pace="7d"), "slots_full"),  # every slot taken comes first
        (_sample(0, running=1, cap="5h", pace="7d"), "cap"),
        (_sample(0, running=1, pace="7d"), "pace"),
        (_sample(0, idle=True), "idle"),
        (_sample(0, running=1), "other"),
    ],
)
def test_what_binds_names_the_first_reason_each_minute(sample: Sample, counted: str) -> None:
    from bot.simulate.plot import what_binds

    w = what_binds([sample, _sample(1, waiting=0)], slots=2)
    assert w.minutes == 2
    found = {
        "slots_full": w.slots_full,
        "cap": sum(w.cap.values()),
        "pace": sum(w.pace.values()),
        "idle": w.idle,
        "other": w.other,
    }
    assert w.waited == (0 if counted == "nothing" else 1)
    assert found == {k: int(k == counted) for k in found}
    assert w.cap == ({"5h": 1} if counted == "cap" else {}) and w.pace == ({"7d": 1} if counted == "pace" else {})
