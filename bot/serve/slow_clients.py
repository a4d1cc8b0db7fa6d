"""Bounds on what a slow or stalled client can hold open.

uvicorn bounds an idle connection only after an answer (`timeout_keep_alive`), the size of a
request's headers (h11's incomplete-event limit) and the requests at once (`limit_concurrency`,
503 past it); it bounds neither the time a client may take to send its headers nor its body, so
a client dribbling a byte a second held its connection, and a place under the concurrency limit,
for as long as it liked. Two guards add what is missing:

- `guarded_protocol`: uvicorn's own HTTP protocol class (h11 or httptools, whichever it picked)
  with a header deadline. From the moment a connection opens, and again after each answer, the
  client has PACER_HEADER_TIMEOUT_SECONDS to finish a request's headers; past it the connection
  closes (with a 408 when a request had begun, silently when nothing came). A request being
  answered is never cut by it. Headers past MAX_HEADER_BYTES are a 431, under either parser.
- `BodyDeadline`: ASGI middleware around the app. While the app reads a request's body, each
  chunk must come within PACER_BODY_TIMEOUT_SECONDS of the last, and the body as a whole at
  PACER_BODY_MIN_RATE bytes a second past that first grace (Apache's mod_reqtimeout rule:
  every MIN_RATE bytes received earn one more second). Past either the client gets a 408 and
  the connection closes; the app sees a disconnect and what it answers is dropped.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from templates import error_text

STATUS = 408
# The most a request's headers may hold, whichever parser uvicorn picked: h11 has this limit of
# its own (its incomplete-event size), httptools none.
MAX_HEADER_BYTES = 16 * 1024
HEADERS_END = re.compile(rb"\n\r?\n")  # the blank line that ends them (both parsers take a bare LF)


def _answer(message: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    body = json.dumps({"error": "timeout", "message": message}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    return headers, body


def guarded_protocol(base: type[asyncio.Protocol], header_seconds: float) -> type[asyncio.Protocol]:
    """`base` (uvicorn's h11 or httptools protocol) with a deadline on every request's headers."""

    class HeaderDeadline(base):  # type: ignore[valid-type,misc]  # a class chosen at run time
        _deadline: asyncio.TimerHandle | None = None
        _heard = False  # a byte of the next request arrived since the deadline was armed
        _header_bytes = 0  # bytes of the next request's headers so far
        _tail = b""  # their last bytes, where a blank line may have begun

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            self._heard = True
            if not self._answering():
                seen = self._tail + data
                end = HEADERS_END.search(seen)
                header_bytes = end.end() - len(self._tail) if end else len(data)  # not the body after them
                if self._header_bytes + header_bytes > MAX_HEADER_BYTES:
                    self._refuse(
                        431,
                        "Request Header Fields Too Large",
                        error_text("server/headers_too_large", limit=MAX_HEADER_BYTES),
                    )
                    return
                self._header_bytes, self._tail = (0, b"") if end else (self._header_bytes + header_bytes, seen[-3:])
            super().data_received(data)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _answering(self) -> bool:
            return self.cycle is not None and not self.cycle.response_complete

        def _arm(self) -> None:
            self._disarm()
            self._heard = False
            self._header_bytes, self._tail = 0, b""
            self._deadline = self.loop.call_later(header_seconds, self._headers_late)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _headers_late(self) -> None:
            self._deadline = None
            if self.transport.is_closing() or self._answering():
                return  # a request is being answered: its body, if any, is BodyDeadline's
            if self._heard:
                self._refuse(STATUS, "Request Timeout", error_text("server/headers_too_slow", seconds=header_seconds))
            else:
                self.transport.close()

        def _refuse(self, status: int, reason: str, message: str) -> None:
            headers, body = _answer(message)
            head = b"".join(b"%s: %s\r\n" % pair for pair in headers)
            self.transport.write(b"HTTP/1.1 %d %s\r\n%s\r\n%s" % (status, reason.encode(), head, body))
            self.transport.close()

    return HeaderDeadline


class BodyDeadline:
    """ASGI middleware: a request body that stalls or crawls is answered 408 and its connection closed."""

    def __init__(self, app: ASGIApp, *, stall_seconds: float, min_rate: float) -> None:
        self.app = app
        self.stall_seconds = stall_seconds
        self.min_rate = min_rate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        start = loop.time()
        received = 0
        body_done = False
        late = False
        answered = False

        async def timed_receive() -> Message:
            nonlocal received, body_done, late
            if late:
                return {"type": "http.disconnect"}
            if body_done:  # after the body, a receive waits for the disconnect: no deadline
                return await receive()
            deadline = min(loop.time() + self.stall_seconds, start + self.stall_seconds + received / self.min_rate)
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                late = True
                if not answered:
                    await _too_slow(send, self.stall_seconds, self.min_rate)
                return {"type": "http.disconnect"}
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                body_done = not message.get("more_body", False)
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal answered
            if late:
                return  # the client was answered 408 and is gone
            if message["type"] == "http.response.start":
                answered = True
            await send(message)

        try:
            await self.app(scope, timed_receive, guarded_send)
        except Exception:
            if not late:
                raise
            # What an app raises on the disconnect it was shown is not an error: the 408 stands.


async def _too_slow(send: Send, stall_seconds: float, min_rate: float) -> None:
    headers, body = _answer(error_text("server/body_too_slow", seconds=stall_seconds, rate=min_rate))
    await send({"type": "http.response.start", "status": STATUS, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


__all__ = ["MAX_HEADER_BYTES", "BodyDeadline", "guarded_protocol"]
