"""`pacer worker`'s health answer: GET /healthz on PACER_WORKER_PORT, at PACER_HOST.

A worker serves no HTTP of its own, so nothing could tell a platform's health check (Fly's
`[checks]` of the worker process group, fly.toml) that it is up. This is the smallest answer:
the stdlib's threading HTTP server on a daemon thread, 200 `{"ok": true, "role": "worker"}`
while the database answers, 503 and why when it does not, 404 for any other path.

A host of `::` binds both stacks (IPV6_V6ONLY off, as Linux has it by default): Fly's proxy comes
over the machine's private IPv4 address and the private network (6PN) over IPv6, and a server on
`0.0.0.0` alone is not reached over 6PN.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sqlalchemy import Engine

from scheduler.errors import ConfigError
from scheduler.front import ping
from templates import error_text

log = logging.getLogger("pacer.worker")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], family: socket.AddressFamily, engine: Engine) -> None:
        self.address_family = family
        self.engine = engine
        super().__init__(address, _Health)

    def server_bind(self) -> None:
        if self.address_family == socket.AF_INET6:  # `::` takes IPv4 too, whatever the system's default
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


class _Health(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        if self.path.split("?")[0] != "/healthz":
            self._answer(404, {"ok": False, "error": "not found: this worker answers GET /healthz only"})
            return
        try:
            ok = ping(self.server.engine)
        except Exception as exc:  # the health check reports, it never raises
            self._answer(503, {"ok": False, "role": "worker", "database": type(exc).__name__})
            return
        self._answer(200 if ok else 503, {"ok": ok, "role": "worker"})

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        pass  # a check every few seconds is not news


def start(host: str, port: int, engine: Engine) -> ThreadingHTTPServer:
    """Answer GET /healthz at host:port on a daemon thread; `.shutdown()` stops it. A host or port
    that cannot be bound is a ConfigError naming it."""
    try:
        family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        server = _Server((host, port), family, engine)
    except OSError as exc:
        raise ConfigError(error_text("cli/worker_health_unbound", host=host, port=port,
                                     reason=exc.strerror or exc)) from None
    threading.Thread(target=server.serve_forever, name="pacer-worker-health", daemon=True).start()
    log.info("worker answers GET /healthz on %s", _shown(host, port))
    return server


def _shown(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
