"""Socket Mode: the same Bolt app, reached over a WebSocket Pacer opens, for hosts with no public URL.

Enabled by SLACK_APP_TOKEN (xapp-…). Bolt skips signature checks for Socket Mode envelopes —
the app-level token authenticated the connection — and acks go back over the socket, so the
listeners run unchanged.
"""

from __future__ import annotations

import logging

from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler

log = logging.getLogger("pacer.slack")

# The built-in client runs each envelope on its own pool; listeners only ack and hand off.
SOCKET_THREADS = 10


class SocketMode:
    """Connect on start, close on stop; the built-in client reconnects by itself in between."""

    def __init__(self, app: App, app_token: str) -> None:
        self._handler = SocketModeHandler(app, app_token=app_token, concurrency=SOCKET_THREADS)
        self.connected = False

    def start(self) -> None:
        self._handler.connect()  # type: ignore[no-untyped-call]
        self.connected = True
        log.info("slack: Socket Mode connected")

    def stop(self) -> None:
        if self.connected:
            self._handler.close()  # type: ignore[no-untyped-call]
            self.connected = False
            log.info("slack: Socket Mode closed")
