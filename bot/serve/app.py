"""The ASGI app: health, and the routers each surface adds. The scheduler runs in the lifespan."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from bot import api as rest_api
from bot.github import catch_up as github_catch_up
from bot.github import webhook as github_webhook
from bot.live import page as live_page
from bot.observe import metrics
from bot.observe.request_ids import RequestIds
from bot.runtime import process
from bot.runtime.notices import install_status_comments
from bot.runtime.process import Pacer
from bot.serve.slow_clients import BodyDeadline
from scheduler.front import ping

log = logging.getLogger("pacer.app")


def create_app(pacer: Pacer, *, start_scheduler: bool = True) -> FastAPI:
    # The notifiers this process posts through are built here, with the process, never by the
    # inbound routes: the sticky status comments when a GitHub token or App is configured (their
    # worker stops with the app), and Slack's below, on the Slack edge's client and pool.
    status = install_status_comments(pacer)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if start_scheduler:
            process.start(pacer)
        for hook in pacer.extras.get("on_start", []):
            hook(pacer)
        try:
            yield
        finally:
            if status is not None:
                await anyio.to_thread.run_sync(status.close)
            for hook in reversed(pacer.extras.get("on_stop", [])):
                hook(pacer)
            if start_scheduler:
                process.stop(pacer)

    app = FastAPI(title="Pacer", version="0.1.0", lifespan=lifespan)
    app.state.pacer = pacer

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        try:
            ok = ping(pacer.engine)
        except Exception as exc:  # the health check reports, it never raises
            return JSONResponse({"ok": False, "database": type(exc).__name__}, status_code=503)
        return JSONResponse({"ok": ok}, status_code=200 if ok else 503)

    # GitHub: POST /github/webhook, always mounted; it answers 503 and why until
    # GITHUB_WEBHOOK_SECRET is set.
    # Mounted before the REST API: routes match in order, and a burst of deliveries should not
    # pay for trying the API's routes first.
    github_webhook.register(app, pacer)
    # What GitHub sent while Pacer was down: the leader re-scans trigger labels and asks for
    # failed deliveries again, at its election and hourly.
    github_catch_up.register(pacer)

    # The REST API: /api/v1 sessions, triggers, policy, holds, chat; bearer PACER_API_TOKEN.
    rest_api.register(app)

    # The live page: GET /, its polled state and its static files; the same token as the API.
    live_page.register(app)

    # Slack: /slack/events (with a signing secret), Socket Mode (with an app token), the thread
    # notifier and the App Home refresher, when a bot token and either of those are configured
    # (Bolt is imported only then). Its lifespan joins this app's.
    if pacer.settings.slack_bot_token and (pacer.settings.slack_signing_secret or pacer.settings.slack_app_token):
        from bot.slack import http as slack_http
        from bot.slack.notices import install_slack_notices

        surface = slack_http.register(app, pacer)
        surface.notices = install_slack_notices(pacer, surface.bolt.client, surface.edge.submit)
        app.state.slack = surface

    # A request body that stalls or crawls is a 408, whichever route reads it.
    app.add_middleware(
        BodyDeadline, stall_seconds=pacer.settings.body_timeout_seconds, min_rate=pacer.settings.body_min_rate
    )

    # GET /metrics (Prometheus), and on every request an id for its log lines and a latency sample.
    app.add_middleware(RequestIds, observe=metrics.register(app, pacer))

    return app
