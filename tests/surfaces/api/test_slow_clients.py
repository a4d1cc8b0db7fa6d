"""Slow and stalled clients are bounded: real sockets against the real app under uvicorn on
loopback, configured as `pacer serve` configures it (`bot.serve.server.client_bounds`), with bounds of
a second so the test takes a few.

Fifty clients dribbling their headers, fifty dribbling a body and fifty stalling mid-body are
each answered 408 and closed within the bound; a connection that says nothing is closed; an
idle connection after an answer is closed after the keep-alive; past the connection limit a
request is a 503, and room comes back as the slow ones are cut."""

from __future__ import annotations

import json
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from bot.runtime.process import Pacer
from bot.serve.app import create_app
from bot.serve.server import client_bounds
from bot.serve.slow_clients import MAX_HEADER_BYTES
from tests.support.api_client import TOKEN, Server, settings_for
from tests.support.harness import build

BOUND = 1.0  # seconds: the header and body timeouts under test
SLACK = 1.5  # what a loaded machine may add before the close is seen
CLIENTS = 50


@pytest.fixture
def served(engine, clock) -> Iterator[Server]:
    ctx, deferrer, _workers, _quota = build(engine, clock, wired=True)
    settings = settings_for(
        engine, PACER_HEADER_TIMEOUT_SECONDS="1", PACER_BODY_TIMEOUT_SECONDS="1", PACER_BODY_MIN_RATE="1024",
        PACER_KEEP_ALIVE_SECONDS="1", PACER_MAX_CONNECTIONS="120",
    )
    pacer = Pacer(settings=settings, engine=engine, clock=clock, deferrer=deferrer, ctx=ctx)
    server = Server(create_app(pacer, start_scheduler=False), **client_bounds(settings)).start()
    yield server
    server.stop()


@dataclass
class Client:
    sock: socket.socket
    pending: bytes  # what is still to send, a little at each tick
    answer: bytes = b""
    closed_after: float | None = None
    stalls_after: int | None = None  # stop sending once this many bytes are out
    sent: int = field(default=0)


def dribble(port: int, requests: list[bytes], *, per_tick: int = 1, first: int | None = None, tick: float = 0.1,
            give_up: float = 6.0, stalls_after: int | None = None) -> list[Client]:
    """Open one connection per request and send each `first` bytes, then `per_tick` bytes every
    `tick` seconds (none past `stalls_after`), until the server closes it; return each with what
    it was answered and how long after the start it was closed."""
    selector = selectors.DefaultSelector()
    clients = []
    start = time.monotonic()
    for request in requests:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setblocking(False)
        client = Client(sock, request, stalls_after=stalls_after)
        selector.register(sock, selectors.EVENT_READ, client)
        clients.append(client)
    next_tick = start
    ticks = 0
    while any(c.closed_after is None for c in clients) and time.monotonic() - start < give_up:
        for key, _ in selector.select(timeout=max(0.0, next_tick - time.monotonic())):
            client = key.data
            try:
                data = client.sock.recv(65536)
            except ConnectionResetError:
                data = b""
            client.answer += data
            if not data:
                client.closed_after = time.monotonic() - start
                selector.unregister(client.sock)
                client.sock.close()
        if time.monotonic() >= next_tick:
            next_tick += tick
            size = first if ticks == 0 and first is not None else per_tick
            ticks += 1
            for client in clients:
                if client.closed_after is not None or not client.pending:
                    continue
                if client.stalls_after is not None and client.sent >= client.stalls_after:
                    continue
                chunk, client.pending = client.pending[:size], client.pending[size:]
                try:
                    client.sock.send(chunk)
                    client.sent += len(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass
    for client in clients:
        if client.closed_after is None:
            selector.unregister(client.sock)
            client.sock.close()
    return clients


def status(answer: bytes) -> int | None:
    head = answer.split(b"\r\n", 1)[0].split()
    return int(head[1]) if len(head) > 1 else None


def body(answer: bytes) -> dict:
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])


def post(path: str, length: int, content: bytes = b"") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: pacer\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode() + content


def all_closed_within(clients: list[Client], bound: float, check: Callable[[Client], bool]) -> None:
    late = [c.closed_after for c in clients if c.closed_after is None or c.closed_after > bound]
    assert not late, f"{len(late)} of {len(clients)} connections outlived {bound} s: {late[:5]}"
    wrong = [c.answer[:200] for c in clients if not check(c)]
    assert not wrong, wrong[:3]


def test_clients_dribbling_their_headers_are_answered_408_and_closed_within_the_bound(served: Server) -> None:
    request = b"GET /healthz HTTP/1.1\r\nHost: pacer\r\nX-Padding: " + b"x" * 200 + b"\r\n\r\n"
    clients = dribble(served.port, [request] * CLIENTS)
    all_closed_within(clients, BOUND + SLACK, lambda c: status(c.answer) == 408)
    assert min(c.closed_after or 0 for c in clients) >= BOUND - 0.1  # cut by the bound, not sooner
    said = body(clients[0].answer)
    assert said["error"] == "timeout" and "PACER_HEADER_TIMEOUT_SECONDS" in said["message"]


def test_a_connection_that_says_nothing_is_closed_silently(served: Server) -> None:
    clients = dribble(served.port, [b""] * 5)
    all_closed_within(clients, BOUND + SLACK, lambda c: c.answer == b"")


def test_clients_dribbling_a_body_below_the_rate_are_answered_408_and_closed(served: Server) -> None:
    content = json.dumps({"prompt": "x" * 2000}).encode()
    request = post("/api/v1/sessions", len(content))
    # The headers at once, then the body 5 bytes a tick: 50 bytes a second, far under 1024.
    slow = dribble(served.port, [request + content] * CLIENTS, first=len(request), per_tick=5)
    all_closed_within(slow, BOUND + 2 * SLACK, lambda c: status(c.answer) == 408)
    said = body(slow[0].answer)
    assert said["error"] == "timeout" and "PACER_BODY_MIN_RATE" in said["message"]
    assert httpx.get(f"{served.url}/api/v1/sessions", headers={"Authorization": f"Bearer {TOKEN}"}).json()["count"] == 0


def test_clients_stalling_mid_body_are_answered_408_after_the_stall_bound(served: Server) -> None:
    content = json.dumps({"prompt": "half of it"}).encode()
    request = post("/api/v1/sessions", len(content)) + content
    head = len(request) - len(content)
    clients = dribble(served.port, [request] * CLIENTS, first=head + 5, stalls_after=head + 5)
    all_closed_within(clients, BOUND + SLACK, lambda c: status(c.answer) == 408)
    assert "PACER_BODY_TIMEOUT_SECONDS" in body(clients[0].answer)["message"]


def test_a_body_at_an_honest_rate_outlasts_both_bounds_and_is_answered(served: Server) -> None:
    content = json.dumps({"prompt": "y" * 2900}).encode()
    request = post("/api/v1/sessions", len(content)) + content
    # 200 bytes a tick is 2,000 bytes a second: the whole body takes about 1.6 s, past the header
    # bound and the body grace, yet above the rate — a request being answered is not cut.
    (client,) = dribble(served.port, [request], first=len(request) - len(content), per_tick=200)
    assert status(client.answer) == 201, client.answer[:300]


def test_an_idle_connection_after_an_answer_closes_after_the_keep_alive(served: Server) -> None:
    (client,) = dribble(served.port, [b"GET /healthz HTTP/1.1\r\nHost: pacer\r\n\r\n"], per_tick=1000)
    assert status(client.answer) == 200
    assert client.closed_after is not None and client.closed_after < 1.0 + SLACK


def test_past_the_connection_limit_a_request_is_503_until_the_slow_ones_are_cut(served: Server) -> None:
    idle = [socket.create_connection(("127.0.0.1", served.port)) for _ in range(125)]
    try:
        deadline = time.monotonic() + 5
        answered = httpx.get(f"{served.url}/healthz", timeout=5)
        assert answered.status_code == 503, answered.text
        # The header bound closes the idle connections; the limit then has room again.
        while time.monotonic() < deadline:
            answered = httpx.get(f"{served.url}/healthz", timeout=5)
            if answered.status_code == 200:
                break
            threading.Event().wait(0.1)
        assert answered.status_code == 200
    finally:
        for sock in idle:
            sock.close()


def test_headers_past_the_limit_are_431_whichever_parser_reads_them(served: Server) -> None:
    request = (
        b"GET /healthz HTTP/1.1\r\nHost: pacer\r\n" + b"X-Padding: " + b"x" * (MAX_HEADER_BYTES + 10) + b"\r\n\r\n"
    )
    (client,) = dribble(served.port, [request], per_tick=4096)
    assert status(client.answer) == 431 and "the limit" in body(client.answer)["message"]
    assert client.closed_after is not None and client.closed_after < BOUND  # at once, not at the deadline
