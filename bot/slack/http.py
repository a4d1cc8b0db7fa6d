"""`POST /slack/events`: Slack's HTTP mode mounted in Pacer's FastAPI app, plus the Slack lifespan.

Order of work per request, cheapest refusal first: the body is read up to PACER_MAX_BODY_BYTES
(413 past it); the signature is checked on the raw bytes (401, before anything is parsed — Bolt
would otherwise json-decode an unsigned body while building its request); then Bolt, whose own
RequestVerification stays on, dispatches on a bounded thread pool, because a sync Bolt dispatch
blocks while its listener runs and must never run on the event loop.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from slack_bolt import App
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from slack_bolt.request.internals import parse_body
from slack_sdk.errors import SlackApiError

from bot.runtime.http_body import read_bounded
from bot.runtime.process import Pacer
from bot.slack.app import UNREADABLE, build_bolt_app
from bot.slack.edge import SlackEdge
from bot.slack.notices import SlackNotices
from bot.slack.socket import SocketMode
from scheduler.errors import ConfigError
from templates import error_text, render

log = logging.getLogger("pacer.slack")

PATH = "/slack/events"
# A dispatch holds its thread only for the ack path (verify, parse, ack, hand off: milliseconds);
# 32 covers a burst of commands and Slack's retries without borrowing the 40 threads FastAPI's
# own sync endpoints share.
DISPATCH_THREADS = 32
REPLAY_WINDOW_SECONDS = 300
# Unix seconds in ASCII digits: `str.isdigit` also takes '²' (which int() refuses), and 400
# digits overflow a float.
TIMESTAMP = re.compile(r"[0-9]{1,12}")


@dataclass
class SlackSurface:
    """What `register` mounted: the Bolt app, its work pool and Socket Mode if any, and the
    notices posted through them (`bot.slack.notices`), which the process's app adds and which stop
    with the surface."""

    bolt: App
    edge: SlackEdge
    socket: SocketMode | None = None
    notices: SlackNotices | None = None
    _limiter: anyio.CapacityLimiter | None = field(default=None, repr=False)

    async def dispatch(self, request: Request, body: bytes) -> Response:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(DISPATCH_THREADS)
        try:
            bolt_request = to_bolt_request(request, body)
            bolt_response = await anyio.to_thread.run_sync(self.bolt.dispatch, bolt_request, limiter=self._limiter)
        except UNREADABLE as exc:
            # Bolt reads a payload's fields (authorizations, team, actions, event…) as Slack
            # shapes them, building its request and again in its error handler (`app.on_error`
            # answers the rest); a signed body shaped otherwise is malformed, not a crash.
            log.warning("slack: a signed request Bolt could not read (%s: %s); answered 400", type(exc).__name__, exc)
            return PlainTextResponse(render("slack/request_malformed.j2"), status_code=400)
        return to_starlette_response(bolt_response)

    def start(self) -> None:
        if self.socket is None:
            return
        try:
            self.socket.start()
        except SlackApiError as exc:
            raise ConfigError(error_text("slack/socket_refused", code=exc.response.get("error"))) from None

    def stop(self) -> None:
        if self.socket is not None:
            self.socket.stop()
        if self.notices is not None:
            self.notices.close()
        self.edge.close()


def register(app: FastAPI, pacer: Pacer, *, verify_token: bool = True) -> SlackSurface:
    """Mount /slack/events on `app` and tie Socket Mode and the work pool to its lifespan."""
    settings = pacer.settings
    edge = SlackEdge(pacer)
    bolt = build_bolt_app(pacer, edge=edge, verify_token=verify_token)
    socket = SocketMode(bolt, settings.slack_app_token) if settings.slack_app_token else None
    surface = SlackSurface(bolt=bolt, edge=edge, socket=socket)
    secret = settings.slack_signing_secret.encode() if settings.slack_signing_secret else None
    limit: int = settings.max_body_bytes

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(surface.start)
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(surface.stop)

    router = APIRouter(lifespan=lifespan)
    # Socket Mode alone (no signing secret) mounts no HTTP route, so nothing unsigned reaches Bolt.
    if secret is not None:

        @router.post(PATH, include_in_schema=False)
        async def slack_events(request: Request) -> Response:
            body = await read_bounded(request, limit)
            if body is None:
                return PlainTextResponse(render("slack/request_too_large.j2", limit=limit), status_code=413)
            if not is_signed(secret, request.headers, body):
                return PlainTextResponse(render("slack/request_unsigned.j2"), status_code=401)
            if not is_readable(body, request.headers.get("content-type")):
                return PlainTextResponse(render("slack/request_malformed.j2"), status_code=400)
            return await surface.dispatch(request, body)

    app.include_router(router)
    return surface


def is_readable(body: bytes, content_type: str | None) -> bool:
    """Whether Bolt can read this signed body: UTF-8 that Bolt's own `parse_body` turns into a
    JSON object (the body itself, or an interactivity form's `payload` field). Bolt reads its
    fields as a dict's, so a list, a string or JSON nested past what `json` can decode would be
    a crash inside Bolt rather than a 400 here."""
    try:
        text = body.decode("utf-8")
        parsed = parse_body(text, content_type.split(";")[0] if content_type else None)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return False
    return isinstance(parsed, dict)


def is_signed(secret: bytes, headers: Mapping[str, str], body: bytes, *, now: float | None = None) -> bool:
    """Slack's v0 signature over the raw bytes, within the 300-second replay window.

    Computed here on bytes because slack_sdk's verifier decodes the body as UTF-8 first and
    raises on anything else; an unsigned request must be a 401, whatever its bytes.
    """
    timestamp = headers.get("x-slack-request-timestamp", "")
    signature = headers.get("x-slack-signature", "")
    if TIMESTAMP.fullmatch(timestamp) is None or not signature:
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > REPLAY_WINDOW_SECONDS:
        return False
    expected = "v0=" + hmac.new(secret, b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace"))
