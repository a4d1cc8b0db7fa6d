"""The HTTP server the tests' stand-ins for outside services (GitHub, Slack) listen with."""

from __future__ import annotations

from http.server import ThreadingHTTPServer


class Backlogged(ThreadingHTTPServer):
    """socketserver listens with a backlog of 5: a burst of connections past it, on a loaded
    machine, is reset ("Connection reset by peer") before the server accepts it. Pacer's own
    servers (uvicorn) listen with 2,048; the stand-ins now take 128."""

    request_queue_size = 128
