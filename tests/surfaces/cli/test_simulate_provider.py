"""`pacer simulate` with provider-reported windows (P18): a `[[windows]]` entry marked
`reported_by` is read the way the `agents` quota source reads it — the provider's utilization,
which counts what other surfaces of the account spend (`outside_usd_per_hour`), heard only with
an agent's output, priced by calibration — and the gate decides on it (docs/simulate.md)."""

from __future__ import annotations

import json
import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.simulate import ScenarioError, load_scenario, parse_scenario, score, simulate
from bot.simulate.meter import LedgerMeter
from bot.simulate.provider import ProviderMeter, build_meter
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "scenarios" / "provider_reported.toml"

SMALL = """
[simulation]
start = "2026-11-02T00:00:00Z"
duration = "1h"

[[windows]]
name = "5h"
period = "5h"
budget_usd = 100
first_reset = "+5h"
reported_by = "anthropic"
outside_usd_per_hour = 12
reports_every = "5m"

[[windows]]
name = "7d"
period = "7d"
budget_usd = 3000
first_reset = "+7d"

[[runtimes]]
name = "claude_code"
burn_usd_per_min = 0.5
"""


def small() -> dict[str, Any]:
    return tomllib.loads(SMALL)


def five(data: dict[str, Any]) -> dict[str, Any]:
    window: dict[str, Any] = data["windows"][0]
    return window


# --------------------------------------------------------------------------- the format


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"reported_by": "google"}, r"windows\[0\]\.reported_by: must be one of anthropic, openai \(got 'google'\)"),
        ({"reported_by": None}, r"windows\[0\]\.outside_usd_per_hour: only with reported_by"),
        ({"outside_usd_per_hour": -1}, r"windows\[0\]\.outside_usd_per_hour: must be a number >= 0"),
        ({"outside_usd_per_hour": "a lot"}, r"windows\[0\]\.outside_usd_per_hour: must be a number >= 0"),
        ({"reports_every": "often"}, r"windows\[0\]\.reports_every: must be a duration such as 90m"),
        ({"outside": [{"at": "+1h"}]}, r"windows\[0\]\.outside\[0\]\.usd_per_hour: is required"),
        ({"outside": [{"at": "+1h", "usd_per_hour": 5, "why": 1}]}, r"windows\[0\]\.outside\[0\]\.why: is not a key"),
        ({"outside": [{"at": "soon", "usd_per_hour": 5}]}, r"windows\[0\]\.outside\[0\]\.at: must be \+<duration>"),
        ({"outside": {"at": "+1h"}}, r"windows\[0\]\.outside: must be an array of tables"),
    ],
)
def test_a_bad_provider_key_is_refused_naming_it(change: dict[str, Any], message: str) -> None:
    data = small()
    for key, value in change.items():
        if value is None:
            five(data).pop(key)
        else:
            five(data)[key] = value
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(data)


def test_reports_every_alone_needs_reported_by_and_a_pool_cannot_be_reported() -> None:
    data = tomllib.loads(SMALL)
    for key in ("reported_by", "outside_usd_per_hour"):
        five(data).pop(key)
    with pytest.raises(ScenarioError, match=r"windows\[0\]\.reports_every: only with reported_by"):
        parse_scenario(data)
    data = small()
    for w in data["windows"]:
        w.pop("budget_usd")
    data["accounts"] = [{"name": "a", "capacity_5h_usd": 50, "capacity_7d_usd": 500}]
    with pytest.raises(ScenarioError, match=r"windows\[0\]\.reported_by: leave it out with \[\[accounts\]\]"):
        parse_scenario(data)


def test_the_cli_refuses_a_bad_provider_window_without_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.cli.main import main

    bad = tmp_path / "bad.toml"
    bad.write_text(SMALL.replace('reports_every = "5m"', 'reports_every = "0m"'))
    assert main(["simulate", str(bad), "--json", str(tmp_path / "r.json")]) == 2
    out = capsys.readouterr()
    assert "windows[0].reports_every: must be a duration such as 90m, 5h, 7d or 1h30m (above zero)" in out.err
    assert out.out == "" and not (tmp_path / "r.json").exists()


def test_outside_spend_follows_its_schedule() -> None:
    data = small()
    five(data)["outside"] = [{"at": "+2h", "usd_per_hour": 0}, {"at": "+30m", "usd_per_hour": 60}]
    window = parse_scenario(data).window("5h")
    start = parse_scenario(data).start
    hour = timedelta(hours=1)
    # $12/h for 30 min, $60/h to +2h, then nothing: $6 + $90
    assert window.outside_usd(start, start + 3 * hour) == pytest.approx(96.0)
    assert window.outside_usd(start + hour, start + 90 * timedelta(minutes=1)) == pytest.approx(30.0)


# --------------------------------------------------------------------------- the meter


def test_the_meter_reads_the_providers_utilization_and_prices_it_by_calibration() -> None:
    scenario = parse_scenario(small())
    meter = build_meter(scenario)
    assert isinstance(meter, ProviderMeter)
    t0, minute = scenario.start, timedelta(minutes=1)
    before = meter.read(t0)  # no agent has spoken: the ledger's estimate stands in, and says so
    sources = [(w.name, w.measured_by, w.fallback) for w in before.windows]
    assert sources == [("5h", None, "no_reading"), ("7d", None, None)]

    meter.start(1, t0, 0.5)  # the agent's first event
    reading = meter.read(t0 + 30 * minute)  # $15 of Pacer's, $6 of others', on a $100 window
    window = reading.windows[0]
    assert window.measured_by == "anthropic" and window.fallback is None
    assert window.utilization == pytest.approx(0.21) and window.resets_at == t0 + timedelta(hours=5)
    assert window.capacity_usd == pytest.approx(15.0 / 0.21)  # calibration: Pacer's spend / utilization
    assert reading.windows[1].measured_by is None and reading.windows[1].capacity_usd == 3000

    meter.finish(1, t0 + 30 * minute, 15.0)
    # The fleet is idle: no agent prints, so the last figure stands while others keep spending.
    idle = meter.read(t0 + 4 * 60 * minute).windows[0]
    assert idle.utilization == pytest.approx(0.21)
    # After the reset the stale figure counts for nothing: the ledger's estimate, saying why.
    rolled = meter.read(t0 + 5 * 60 * minute + minute).windows[0]
    assert rolled.measured_by is None and rolled.fallback == "rolled_over"
    meter.start(2, t0 + 5 * 60 * minute + minute, 0.5)  # an agent again: its first event, then one each 5 minutes
    heard = meter.read(t0 + 5 * 60 * minute + 2 * minute).windows[0]
    assert heard.measured_by == "anthropic" and heard.utilization == pytest.approx(12 / 60 / 100)
    later = meter.read(t0 + 5 * 60 * minute + 6 * minute).windows[0]
    assert later.utilization == pytest.approx((0.5 * 5 + 12 * 6 / 60) / 100)


def test_a_window_past_its_budget_is_reported_rejected() -> None:
    data = small()
    five(data)["outside_usd_per_hour"] = 240  # $4 a minute: the $100 window is spent in 25 minutes
    scenario = parse_scenario(data)
    meter = build_meter(scenario)
    assert isinstance(meter, ProviderMeter)
    meter.start(1, scenario.start + timedelta(minutes=26), 0.5)
    assert meter.book.kept["5h"].status == "rejected"
    assert meter.read(scenario.start + timedelta(minutes=26)).windows[0].utilization >= 1.0


def test_a_scenario_without_reported_by_keeps_the_ledger_meter() -> None:
    data = small()
    for key in ("reported_by", "outside_usd_per_hour", "reports_every"):
        five(data).pop(key)
    assert type(build_meter(parse_scenario(data))) is LedgerMeter


# --------------------------------------------------------------------------- a run


def shortened(hours: int, *, reported: bool = True) -> str:
    """The example, cut to `hours` (its first 5-hour window in five): a test runs in seconds."""
    text = EXAMPLE.read_text().replace('duration = "1d"', f'duration = "{hours}h"', 1)
    assert f'duration = "{hours}h"' in text
    if not reported:  # Pacer's own ledger alone: the same demand, the provider's word left out
        for line in ('reported_by = "anthropic"\n', "outside_usd_per_hour = 24\n", 'reports_every = "5m"\n'):
            assert line in text
            text = text.replace(line, "", 1)
    return text


def test_the_example_holds_spot_work_on_the_provider_window_and_spends_nothing_past_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.cli.main import main

    scenario, out = tmp_path / "provider.toml", tmp_path / "r.json"
    scenario.write_text(shortened(5))
    assert main(["simulate", str(scenario), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    report = json.loads(out.read_text())
    w = report["windows"]["5h"]
    assert w["reported_by"] == "anthropic" and w["outside_usd"] == pytest.approx(120.0)
    assert w["holds"] > 0 and w["provider_reports"] > 0  # the gate decided on the provider's figure
    assert w["past_budget_usd"] == 0.0 and w["spot_past_budget_usd"] == 0.0
    complete = [i for i in w["instances"] if i["complete"]]
    assert len(complete) == 1
    for i in complete:  # others took $120 of the window: Pacer stopped short of the line for it
        assert i["outside_usd"] == pytest.approx(120.0)
        assert i["spent_usd"] == pytest.approx(i["pacer_usd"] + i["outside_usd"], abs=0.02)
        assert i["spent_usd"] <= 300.0 and i["pacer_usd"] < 240.0 - 60.0
    assert w["gate_capacity_usd"]["last"] is not None and w["gate_capacity_usd"]["last"] < 300.0
    assert "5h:" in text and "as Anthropic (Claude Code) reports it: $120.00 spent outside Pacer" in text
    assert "Pacer spent $0.00 past the provider's budget ($0.00 of it spot)" in text
    assert f"the gate on it: {w['holds']} spot holds" in text
    assert report["lost"] == 0 and report["priority_start_delay_minutes"]["max"] == 0.0

    # Pacer's own ledger alone would have let spot work run to $240 of the window: with the others'
    # $120, past the provider's $300.
    ledger = score(simulate(load_scenario_text(tmp_path, shortened(5, reported=False)), "pacer"))
    alone = [i for i in ledger["windows"]["5h"]["instances"] if i["complete"]]
    assert "reported_by" not in ledger["windows"]["5h"]
    assert all(i["spent_usd"] + 120.0 > 300.0 for i in alone)
    assert all(i["spent_usd"] > p["pacer_usd"] + 50.0 for i, p in zip(alone, complete))


def load_scenario_text(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "ledger.toml"
    path.write_text(text)
    return load_scenario(str(path))


def test_a_hold_counts_against_the_window_its_sentence_names() -> None:
    from collections import Counter

    from bot.simulate.provider import tally_gate

    counts: dict[str, Counter[str]] = {"5h": Counter()}
    budget = ("Held by the spot gate's budget (at_utilization_limit): the 5-hour window has no non-reserved budget "
              "left for it — 5-hour: 82% of the window used · as Anthropic (Claude Code) reports it.")
    tally_gate(counts, "held", {"reason": "at_utilization_limit", "sentence": budget})
    tally_gate(counts, "held", {"reason": "at_utilization_limit", "sentence": "the 5h window is at 81%, at or above"})
    tally_gate(counts, "paused", {"reason": "at_utilization_limit", "sentence": "weekly: $9,700.00 spent"})
    tally_gate(counts, "held", {"reason": "fleet_at_cap", "sentence": "5-hour: every slot"})
    assert counts["5h"] == Counter({"held": 2, "as_reported": 1})
