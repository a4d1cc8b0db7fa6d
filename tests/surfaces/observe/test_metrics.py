"""`GET /metrics` on a real app under uvicorn: scraped while a burst of GitHub deliveries and API
requests lands, and checked against the database rows once it settles; two apps on one database
answer alike; PACER_METRICS_TOKEN guards it when set; docs/metrics.md describes exactly what is
served, and the Grafana dashboard asks for nothing else."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine
from sqlmodel import select

from bot.observe.metrics_collector import DatabaseCollector
from bot.runtime.process import Pacer
from bot.serve.app import create_app
from scheduler.store.db import make_engine, session_scope
from scheduler.store.models import Session, Turn
from scheduler.store.policy import load_policy
from scheduler.store.sessions import class_of
from scheduler.testing import VirtualClock
from tests.support.api_client import TOKEN, Api, Server, make_api, settings_for
from tests.support.github_support import SECRET, headers, issue_payload
from tests.support.harness import build
from tests.support.paths import ROOT

DOCS = ROOT / "docs" / "metrics.md"
DASHBOARD = ROOT / "deploy" / "grafana-dashboard.json"
DELIVERIES = 24
API_SESSIONS = 12

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str, **kw: str) -> Samples:
    response = httpx.get(f"{url}/metrics", headers=kw, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    found: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def of(samples: Samples, name: str, **labels: str) -> float:
    """The value of `name` with exactly these labels; 0 when the series is absent (nothing counted)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def series(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: value for (n, labels), value in samples.items() if n == name}


@pytest.fixture
def api(any_engine: Engine, clock: VirtualClock) -> Iterator[Api]:
    served = make_api(any_engine, clock, max_sessions=2, turn_minutes=30, GITHUB_WEBHOOK_SECRET=SECRET)
    yield served
    served.close()


def _burst(api: Api) -> list[int]:
    """Deliveries and API creations at once, from several threads; returns their status codes."""
    trigger = {
        "name": "label-pacer",
        "kind": "github_label",
        "config": {"label": "pacer"},
        "prompt_template": "{{ title }}",
    }
    assert api.post("/triggers", trigger).status_code == 201

    def deliver(number: int) -> int:
        body = json.dumps(issue_payload("labeled", number=number, label="pacer", labels=("pacer",))).encode()
        return api.client.post("/github/webhook", content=body, headers=headers("issues", body)).status_code

    def create(rank: int) -> int:
        return int(api.post("/sessions", {"prompt": f"clean-up {rank}", "precedence": rank}).status_code)

    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(deliver, 100 + n) for n in range(DELIVERIES)]
        futures += [pool.submit(create, n) for n in range(API_SESSIONS)]
        return [f.result() for f in futures]


def test_a_scrape_during_a_burst_answers_and_the_gauges_match_the_rows(api: Api) -> None:
    scrapes: list[Samples] = []
    stop = threading.Event()

    def keep_scraping() -> None:
        while not stop.is_set():
            scrapes.append(scrape(api.server.url))

    scraper = threading.Thread(target=keep_scraping)
    scraper.start()
    try:
        codes = _burst(api)
    finally:
        stop.set()
        scraper.join(timeout=60)
    assert Counter(codes) == {202: DELIVERIES, 201: API_SESSIONS}
    assert scrapes and all(of(s, "pacer_database_up") == 1 for s in scrapes)
    api.server.app.state.github.drain()  # the first turns the deliveries asked for
    api.deferrer.advance(timedelta(minutes=31))  # the first two turns finish; the queue pass starts two more

    samples = scrape(api.server.url)
    with session_scope(api.pacer.engine) as db:
        policy = load_policy(db)
        sessions = list(db.exec(select(Session)))
        turns = list(db.exec(select(Turn)))
        waiting = [s for s in sessions if s.status == "waiting"]
        depth = Counter(
            (
                class_of(s, policy).value,
                s.hold_reason or s.pause_reason or s.park_reason or ("asleep" if s.wake_at else "ready"),
            )
            for s in waiting
        )
        holds = Counter(s.hold_reason for s in waiting if s.hold_reason)
    assert len(sessions) == DELIVERIES + API_SESSIONS
    assert {k: v for k, v in series(samples, "pacer_sessions").items() if v} == {
        (("status", status),): float(n) for status, n in Counter(s.status for s in sessions).items()
    }
    counted = {dict(k)["class"] + "/" + dict(k)["reason"]: v for k, v in series(samples, "pacer_queue_depth").items()}
    assert {k: v for k, v in counted.items() if v} == {
        f"{klass}/{reason}": float(n) for (klass, reason), n in depth.items()
    }
    assert depth and len(waiting) > DELIVERIES  # most of the burst waits behind two slots
    assert {k: v for k, v in series(samples, "pacer_session_holds").items() if v} == {
        (("reason", r),): float(n) for r, n in holds.items()
    }
    finished = [t for t in turns if t.status in ("done", "failed", "halted")]
    assert finished and all(t.outcome == "success" for t in finished)
    assert of(samples, "pacer_turns_total", status="done", outcome="success") == len(finished)
    assert of(samples, "pacer_turn_duration_seconds_count", outcome="success") == len(finished)
    assert of(samples, "pacer_turn_duration_seconds_sum", outcome="success") == pytest.approx(
        sum((t.duration_ms or 0) for t in finished) / 1000)
    running = sum(1 for t in turns if t.status == "running")
    assert (
        of(samples, "pacer_fleet_running", **{"class": "spot"})
        + of(samples, "pacer_fleet_running", **{"class": "priority"})
        == running
    )
    assert of(samples, "pacer_fleet_slots") == 2
    assert of(samples, "pacer_preemptions_total") == sum(s.preemption_count for s in sessions)

    # The quota windows the gate reads, against their budgets.
    card = api.get("/policy").json()["gate"]
    assert card["windows"]
    for window in card["windows"]:
        unit, name = window["unit"], window["name"]
        assert unit == "usd"  # the harness's windows are calibrated
        assert of(samples, "pacer_window_spent_usd", window=name) == pytest.approx(window["spent"])
        assert of(samples, "pacer_window_spot_budget_usd", window=name) == pytest.approx(window["spot_budget"])
        assert of(samples, "pacer_window_capacity_usd", window=name) == pytest.approx(window["capacity"])
        share = window["spent"] / window["capacity"]
        assert of(samples, "pacer_window_spent_ratio", window=name) == pytest.approx(share)
        assert of(samples, "pacer_window_fleet_burn_usd_per_second", window=name) == pytest.approx(
            window["fleet_burn_per_min"] / 60)

    # HTTP latency, by route template: one sample per answered request.
    assert (
        of(samples, "pacer_http_request_duration_seconds_count", method="POST", route="/github/webhook", status="202")
        == DELIVERIES
    )
    assert (
        of(samples, "pacer_http_request_duration_seconds_count", method="POST", route="/api/v1/sessions", status="201")
        == API_SESSIONS
    )
    assert not any(
        dict(k).get("route") == "/metrics" for k in series(samples, "pacer_http_request_duration_seconds_count")
    )


def test_two_apps_on_one_database_report_the_same_gauges(api: Api, clock: VirtualClock) -> None:
    engine = api.pacer.engine
    for rank in range(5):
        assert api.post("/sessions", {"prompt": f"work {rank}", "precedence": rank}).status_code == 201
    other = Pacer(settings=settings_for(engine), engine=engine, clock=clock, deferrer=api.deferrer, ctx=api.ctx)
    second = Server(create_app(other, start_scheduler=False)).start()
    try:
        first, again = scrape(api.server.url), scrape(second.url)
    finally:
        second.stop()
    per_process = ("pacer_http_", "process_")  # what each process counts of its own
    from_rows = {k: v for k, v in first.items() if not k[0].startswith(per_process)}
    assert from_rows == {k: v for k, v in again.items() if not k[0].startswith(per_process)}
    assert of(first, "pacer_sessions", status="running") == 2 and of(first, "pacer_sessions", status="waiting") == 3


def test_a_metrics_token_guards_the_scrape(engine: Engine, clock: VirtualClock) -> None:
    guarded = make_api(engine, clock, PACER_METRICS_TOKEN="scrape-me-0123456789")
    try:
        url = f"{guarded.server.url}/metrics"
        missing = httpx.get(url)
        assert missing.status_code == 401 and "PACER_METRICS_TOKEN" in missing.json()["message"]
        assert (
            httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 401
        )  # the API's token is not it
        assert of(scrape(guarded.server.url, Authorization="Bearer scrape-me-0123456789"), "pacer_database_up") == 1
    finally:
        guarded.close()


def _family(name: str) -> str:
    for suffix in ("_bucket", "_count", "_sum", "_total"):
        name = name.removesuffix(suffix)
    return name


def test_every_metric_served_is_documented_and_the_dashboard_asks_only_for_those(api: Api) -> None:
    assert api.post("/sessions", {"prompt": "one"}).status_code == 201  # an HTTP sample, so its histogram shows
    served = {family.name for family in text_string_to_metric_families(httpx.get(f"{api.server.url}/metrics").text)}
    documented = {_family(name) for name in re.findall(r"^\| `(pacer_[a-z_]+)`", DOCS.read_text(), re.M)}
    assert {name for name in served if name.startswith("pacer_")} == documented
    assert {"process_cpu_seconds", "python_info"} <= served  # the collectors docs/metrics.md names
    dashboard = json.loads(DASHBOARD.read_text())
    asked = {_family(name) for panel in dashboard["panels"] for target in panel["targets"]
             for name in re.findall(r"pacer_[a-z_]+", target["expr"])}
    assert asked and asked <= documented


def test_a_scrape_says_the_database_is_down_rather_than_failing(engine: Engine, clock: VirtualClock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock)
    gone = make_engine("postgresql://pacer@127.0.0.1:9/pacer")  # the discard port: nothing listens
    families = list(DatabaseCollector(gone, ctx).collect())
    assert [(f.name, [s.value for s in f.samples]) for f in families] == [("pacer_database_up", [0.0])]
