"""`GET /metrics`: Pacer in Prometheus' text format (prometheus-client), described metric by metric
in docs/metrics.md.

Two kinds of metric, on purpose:
  * everything about the queue, holds, windows, turns, re-checks and preemptions is read from the
    database at scrape time (`bot.observe.metrics_collector.DatabaseCollector`), so every process sharing
    the database answers alike — scrape any one of them;
  * the HTTP latency histogram (`pacer_http_request_duration_seconds`) is what this process served,
    counted in its memory: scrape every process that takes requests (each is its own target, and
    Prometheus' `instance` label tells them apart); a restart starts it from zero, as any counter.

Each app has its own registry rather than prometheus-client's global one, so two apps in one
process (the tests, a console beside a server) never register a metric twice.

Open by default, like most exporters: the numbers are counts, sizes and money, never a prompt,
title or secret, and Fly's own metrics scraper sends no credentials. Set `PACER_METRICS_TOKEN`
to require `Authorization: Bearer <token>` (a setting like any other: `pacer config` lists it).
"""

from __future__ import annotations

import hmac
import platform
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)

from bot.observe.metrics_collector import DatabaseCollector
from bot.observe.request_ids import Observe
from bot.runtime.process import Pacer
from templates import error_text

PATH = "/metrics"
# Seconds: a webhook is answered in milliseconds, a Slack command well under 3 s.
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# The health check's series is there from the start, at 0, so the latency family is never absent
# from a scrape (the first request a deployment answers is a health check).
FIRST_ROUTE = ("GET", "/healthz", "200")

# A `_created` series per label set doubles the output and no dashboard reads it.
disable_created_metrics()  # type: ignore[no-untyped-call]


def register(app: FastAPI, pacer: Pacer) -> Observe:
    """Mount GET /metrics; returns what records one served request in the latency histogram."""
    registry = CollectorRegistry()
    registry.register(DatabaseCollector(pacer.engine, pacer.ctx))
    ProcessCollector(registry=registry)  # process_*: CPU, memory, open files, start time (Linux only)
    PlatformCollector(registry=registry)  # python_info
    build = Gauge("pacer_build_info", "1, labelled with the Pacer and Python versions this process runs",
                  ["version", "python"], registry=registry)
    build.labels(package_version(), platform.python_version()).set(1)
    latency = Histogram(
        "pacer_http_request_duration_seconds",
        "Time to answer an HTTP request, by route (this process)",
        ["method", "route", "status"],
        buckets=HTTP_BUCKETS,
        registry=registry,
    )
    latency.labels(*FIRST_ROUTE)
    token = (pacer.settings.metrics_token or "").strip()

    def observe(method: str, route: str, status: int, seconds: float) -> None:
        if route != PATH:  # a scrape timing itself would only measure the database read
            latency.labels(method, route, str(status)).observe(seconds)

    def metrics(request: Request) -> Response:
        if token:
            refused = refusal(request.headers.get("authorization"), token)
            if refused is not None:
                return refused
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    app.add_api_route(PATH, metrics, methods=["GET"], include_in_schema=False)
    app.state.metrics = registry
    return observe


def package_version() -> str:
    """The installed pacer package's version (pyproject.toml's), or `unknown` run from a bare tree."""
    try:
        return version("pacer")
    except PackageNotFoundError:
        return "unknown"


def refusal(header: str | None, token: str) -> JSONResponse | None:
    """None when `header` carries the bearer token, else the 401 that says what to send."""
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        message = error_text("metrics/token_missing")
    elif not hmac.compare_digest(given.strip().encode(), token.encode()):
        message = error_text("metrics/token_wrong")
    else:
        return None
    return JSONResponse(
        {"error": "unauthorized", "message": message}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
    )
