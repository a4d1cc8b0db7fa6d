"""`/metrics` held to Prometheus' conventions, on a real `pacer serve` over a fresh, empty SQLite
database, scraped over HTTP: every family the Grafana dashboard asks for has a sample before
anything has happened; one unit per family, in its name, and rates per second; counters end in
`_total`; `pacer_build_info` and the process collector; `promtool check metrics` finds nothing to
fix (required in CI: PACER_REQUIRE_PROMTOOL); and fly.toml has Fly scrape the port and path the
app serves."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from bot.observe.metrics import PATH
from scheduler.testing import VirtualClock
from tests.support.api_client import make_api
from tests.support.paths import ROOT

DASHBOARD = ROOT / "deploy" / "grafana-dashboard.json"
PYPROJECT = ROOT / "pyproject.toml"
FLY = ROOT / "fly.toml"
UNITS = ("_usd", "_ratio", "_seconds", "_bytes", "_per_second")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def empty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`pacer serve` on a database nothing has happened in yet, with nothing configured; its URL."""
    room = tmp_path_factory.mktemp("empty")
    port = _port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PACER_", "SLACK_", "GITHUB_")) and k != "DATABASE_URL"}
    env |= {"PYTHONPATH": str(ROOT), "DATABASE_URL": f"sqlite:///{room}/pacer.db", "PACER_PORT": str(port)}
    with (room / "serve.log").open("w") as log:
        server = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve"], cwd=room, env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # polled on /metrics, which counts no request, so the scrape is of a server no one asked yet
            try:
                if httpx.get(url + PATH, timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, (room / "serve.log").read_text()[-3000:]
            time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _text(url: str) -> str:
    response = httpx.get(url + PATH, timeout=30)
    assert response.status_code == 200, response.text
    return response.text


def _sampled(text: str) -> dict[str, int]:
    """Each family's name (as the parser names it: a counter's without `_total`) and its number of samples."""
    return {family.name: len(family.samples) for family in text_string_to_metric_families(text)}


def _family(name: str) -> str:
    for suffix in ("_bucket", "_count", "_sum", "_total"):
        name = name.removesuffix(suffix)
    return name


def test_every_family_the_dashboard_asks_for_has_a_sample_in_an_empty_deployment(empty: str) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    asked = {_family(name) for panel in dashboard["panels"] for target in panel["targets"]
             for name in re.findall(r"\b(?:pacer|process|python)_[a-z_]+", target["expr"])}
    sampled = _sampled(_text(empty))
    assert len(asked) > 15
    assert sorted(name for name in asked if not sampled.get(name)) == []
    # The families that count what is waiting or held say 0 rather than vanish.
    for name in ("pacer_queue_depth", "pacer_session_holds", "pacer_operator_holds", "pacer_queue_holds"):
        assert sampled[name] > 0, name


def test_each_family_has_one_unit_in_its_name_and_rates_are_per_second(empty: str) -> None:
    text = _text(empty)
    families = list(text_string_to_metric_families(text))
    pacer = [f for f in families if f.name.startswith("pacer_")]
    assert not [f.name for f in pacer if any("unit" in s.labels for s in f.samples)]  # a unit is never a label
    assert not [f.name for f in pacer if "per_minute" in f.name]
    money = [f.name for f in pacer if f.name.startswith(("pacer_window_", "pacer_fleet_burn"))]
    assert money and not [n for n in money if not n.endswith(UNITS) and n != "pacer_window_measured"], money
    counters = re.findall(r"^# TYPE (\S+) counter$", text, re.M)
    assert counters and all(name.endswith("_total") for name in counters), counters
    # The same window in its two units: a fraction of the capacity is the dollars over the dollar capacity.
    values = {(s.name, s.labels.get("window")): s.value for f in pacer for s in f.samples}
    for window in ("5h", "7d"):
        budget = values[("pacer_window_spot_budget_usd", window)] / values[("pacer_window_capacity_usd", window)]
        assert values[("pacer_window_spot_budget_ratio", window)] == pytest.approx(budget)
        assert values[("pacer_window_sustainable_rate_usd_per_second", window)] > 0


def test_a_scrape_names_the_build_and_the_process(empty: str) -> None:
    samples = {s.name: s for f in text_string_to_metric_families(_text(empty)) for s in f.samples}
    build = samples["pacer_build_info"]
    version = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    assert (build.value, build.labels) == (1.0, {"version": version, "python": platform.python_version()})
    assert samples["python_info"].value == 1.0
    if sys.platform.startswith("linux"):  # the process collector reads /proc
        assert time.time() - 600 < samples["process_start_time_seconds"].value <= time.time()
        assert samples["process_resident_memory_bytes"].value > 0
        assert "process_cpu_seconds_total" in samples


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("PACER_REQUIRE_PROMTOOL") == "1":
            pytest.fail("PACER_REQUIRE_PROMTOOL=1 but promtool is not on PATH (Debian: apt-get install prometheus)")
        pytest.skip("promtool is not on PATH (Debian's `prometheus` package ships it)")
    return found


def _check(promtool: str, text: str) -> None:
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, ""), text


def test_promtool_finds_nothing_to_fix_in_a_scrape_of_an_empty_deployment(empty: str) -> None:
    _check(_promtool(), _text(empty))


def test_promtool_finds_nothing_to_fix_in_a_scrape_of_a_busy_one(engine: Engine, clock: VirtualClock) -> None:
    promtool = _promtool()
    api = make_api(engine, clock, max_sessions=1, turn_minutes=10)
    try:
        for n in range(3):
            assert api.post("/sessions", {"prompt": f"work {n}"}).status_code == 201
        api.deferrer.advance(timedelta(minutes=11))  # a turn finishes: the counter and histogram have a series
        text = _text(api.server.url)
        sampled = _sampled(text)
        assert sampled["pacer_turns"] and sampled["pacer_http_request_duration_seconds"]
        _check(promtool, text)
    finally:
        api.close()


def test_fly_scrapes_the_port_and_path_the_app_serves() -> None:
    fly = tomllib.loads(FLY.read_text())
    port = int(fly["env"]["PACER_PORT"])
    assert fly["http_service"]["internal_port"] == port
    assert fly["metrics"] == [{"port": port, "path": PATH, "processes": ["app"]}]  # workers serve no HTTP
    docs = (ROOT / "docs" / "metrics.md").read_text()
    assert f"pacer.internal:{port}" in docs and "[[metrics]]" in docs


def test_ci_installs_promtool_and_requires_the_check() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"apt-get install [^\n]*--no-install-recommends \\\n[^\n]* prometheus >", ci)
    assert "export PACER_REQUIRE_PROMTOOL=1" in ci
