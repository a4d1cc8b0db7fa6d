"""Every HTTP request gets an id: the caller's `X-Request-ID` when it is a sane token, else a new
one. It is set in `bot.observe.logs.REQUEST_ID` for the request's whole handling, so every line logged
meanwhile (uvicorn's access line included) carries it, and it is echoed in the answer's
`X-Request-ID` header, so a person holding a response can find its lines.

A plain ASGI middleware rather than Starlette's `BaseHTTPMiddleware`: it adds nothing but a
header and a contextvar to each request, so a burst of webhooks pays no extra task per request.
It also times each request and hands (method, route, status, seconds) to `observe`, the HTTP
latency histogram of `bot.observe.metrics`; the route is the matched path template, so
`/api/v1/sessions/{session_id}` is one series, not one per session.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.observe.logs import REQUEST_ID

HEADER = "x-request-id"
# An incoming id is written into log lines: letters, digits and a few separators only, bounded,
# so a caller cannot forge a line or flood one.
ACCEPTED = re.compile(r"[A-Za-z0-9._:-]{1,128}")
UNMATCHED = "unmatched"

Observe = Callable[[str, str, int, float], None]


def request_id(headers: list[tuple[bytes, bytes]]) -> str:
    """The caller's X-Request-ID when it is acceptable, else a fresh 16-hex-digit id."""
    for name, value in headers:
        if name.lower() == HEADER.encode():
            text = value.decode("latin-1").strip()
            if ACCEPTED.fullmatch(text):
                return text
            break
    return secrets.token_hex(8)


def route_of(scope: Scope) -> str:
    """The matched route's path template, or `unmatched` (a 404 no route took).

    Rebuilt from the path and the parameters the router took out of it, segment by segment:
    an included router's route knows only its own part of the path, not its prefix."""
    if (
        scope.get("route") is None and scope.get("endpoint") is None
    ):  # a plain route of an included router sets only its endpoint
        return UNMATCHED
    names = {str(value): name for name, value in (scope.get("path_params") or {}).items()}
    return "/".join(
        "{" + names[part] + "}" if part in names else part for part in str(scope.get("path", "")).split("/")
    )


class RequestIds:
    def __init__(self, app: ASGIApp, observe: Observe | None = None) -> None:
        self.app = app
        self.observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(scope.get("headers") or [])
        token = REQUEST_ID.set(rid)
        status = 500  # what the server answers when the app raised before it answered
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message["headers"] = [*message.get("headers", []), (HEADER.encode(), rid.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if self.observe is not None:
                self.observe(scope.get("method", ""), route_of(scope), status, time.perf_counter() - started)
            REQUEST_ID.reset(token)
