"""A local stand-in for Slack: its Web API and response URLs on loopback, and request signing.

`MockSlack` is a real HTTP server on 127.0.0.1 in a thread. Pacer's WebClient points its
`base_url` at `<url>/api/`, slash commands and block actions carry a `response_url` under
`<url>/response/…`, and every call is recorded (method, headers, decoded body) so a test asserts
what Pacer posted and where. `signed_headers` signs a body the way Slack does, so tests send real
signed HTTP requests into the real Bolt app.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from tests.support.api_client import Server
from tests.support.loopback import Backlogged

BOT_USER_ID = "UPACERBOT"
BOT_ID = "BPACERBOT"
TEAM_ID = "T0PACER"


def sign(secret: str, body: str | bytes, timestamp: int) -> str:
    """Slack's v0 signature: HMAC-SHA256 over `v0:{timestamp}:{raw body}`."""
    raw = body.encode() if isinstance(body, str) else body
    base = b"v0:" + str(timestamp).encode() + b":" + raw
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def signed_headers(
    secret: str,
    body: str | bytes,
    *,
    timestamp: int | None = None,
    content_type: str = "application/x-www-form-urlencoded",
    retry_num: int | None = None,
) -> dict[str, str]:
    ts = int(time.time()) if timestamp is None else timestamp
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": sign(secret, body, ts),
    }
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = "http_timeout"
    return headers


@dataclass(frozen=True)
class Call:
    """One request Pacer made to the mock."""

    path: str  # "/api/chat.postMessage" or "/response/<id>"
    headers: Mapping[str, str]
    body: dict[str, Any]
    at: float = field(default_factory=time.perf_counter)  # when it arrived (for benchmarks)

    @property
    def method(self) -> str:
        return self.path.removeprefix("/api/")


@dataclass
class MockSlack:
    """Records every call; answers `ok` the way Slack's Web API does for the methods Pacer uses."""

    calls: list[Call] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # method -> Slack error code to answer with
    socket_url: str | None = None  # what apps.connections.open hands the Socket Mode client
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _ts: Any = field(default_factory=lambda: itertools.count(1))
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the mock first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def api_url(self) -> str:
        return self.url + "/api/"

    def response_url(self, name: str = "cmd") -> str:
        return f"{self.url}/response/{name}"

    def start(self) -> MockSlack:
        mock = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = _decode(raw, self.headers.get("Content-Type", ""))
                status, answer = mock._answer(self.path, body)
                mock._record(Call(self.path, dict(self.headers.items()), body))
                payload = json.dumps(answer).encode() if isinstance(answer, dict) else answer.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if isinstance(answer, dict) else "text/plain")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = Backlogged(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="mock-slack", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any] | str]:
        if path.startswith("/response/"):
            return 200, "ok"
        method = path.removeprefix("/api/")
        if method in self.errors:
            return 200, {"ok": False, "error": self.errors[method]}
        ts = f"{1_790_000_000 + next(self._ts)}.000100"
        if method == "auth.test":
            return 200, {"ok": True, "url": "https://pacer-test.slack.com/", "team": "Pacer Test", "user": "pacer",
                         "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID}
        if method == "apps.connections.open" and self.socket_url:
            return 200, {"ok": True, "url": self.socket_url}
        if method == "chat.postMessage":
            return 200, {
                "ok": True,
                "channel": body.get("channel"),
                "ts": ts,
                "message": {"text": body.get("text"), "ts": ts},
            }
        if method == "chat.update":
            return 200, {"ok": True, "channel": body.get("channel"), "ts": body.get("ts"),
                         "text": body.get("text"), "message": {"text": body.get("text")}}
        if method == "chat.postEphemeral":
            return 200, {"ok": True, "message_ts": ts}
        if method == "views.publish":
            return 200, {
                "ok": True,
                "view": {"id": "V0HOME", "type": "home", "blocks": _as_list(body.get("view")).get("blocks", [])},
            }
        return 200, {"ok": False, "error": "unknown_method"}

    def _record(self, call: Call) -> None:
        with self._cond:
            self.calls.append(call)
            self._cond.notify_all()

    def calls_to(self, method_or_path: str) -> list[Call]:
        with self._cond:
            return [c for c in self.calls if c.method == method_or_path or c.path == method_or_path]

    def wait_for(self, predicate: Callable[[list[Call]], list[Call]], *, timeout: float = 5.0) -> list[Call]:
        """Block until `predicate(calls)` returns a non-empty list; return it (fail after timeout)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = predicate(list(self.calls))
                if found:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"no matching Slack call within {timeout}s; calls: {[c.path for c in self.calls]}"
                    )
                self._cond.wait(left)

    def wait_for_method(self, method_or_path: str, *, count: int = 1, timeout: float = 5.0) -> list[Call]:
        def matching(calls: list[Call]) -> list[Call]:
            found = [c for c in calls if c.method == method_or_path or c.path == method_or_path]
            return found if len(found) >= count else []

        return self.wait_for(matching, timeout=timeout)


def _as_list(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}


def _decode(raw: bytes, content_type: str) -> dict[str, Any]:
    text = raw.decode("utf-8") if raw else ""
    if not text:
        return {}
    if "json" in content_type:
        return dict(json.loads(text))
    form = {k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()}
    for key in ("blocks", "view", "attachments"):  # the WebClient sends these JSON-encoded in a form
        if isinstance(form.get(key), str):
            form[key] = json.loads(form[key])
    return form


class PacerServer(Server):
    """Pacer's real FastAPI app under a real uvicorn on a free loopback port, in a thread, with
    its lifespan (the scheduler, the edges) run."""

    def __init__(self, app: Any) -> None:
        super().__init__(app, lifespan="on")


def command_body(
    text: str, *, user: str, response_url: str, channel: str = "C0GENERAL", command: str = "/pacer"
) -> str:
    """A slash-command POST body as Slack sends it (form-encoded)."""
    from urllib.parse import urlencode

    return urlencode(
        {
            "token": "legacy-unused", "team_id": TEAM_ID, "team_domain": "pacer-test", "channel_id": channel,
            "channel_name": "general", "user_id": user, "user_name": user.lower(), "command": command, "text": text,
            "api_app_id": "A0PACER", "is_enterprise_install": "false", "response_url": response_url,
            "trigger_id": "13345224609.738474920.8088930838d88f008e0",
        }
    )


def event_body(event: Mapping[str, Any], *, event_id: str) -> str:
    """An Events API callback as Slack sends it (JSON)."""
    return json.dumps(
        {
            "token": "legacy-unused",
            "team_id": TEAM_ID,
            "api_app_id": "A0PACER",
            "event": dict(event),
            "type": "event_callback",
            "event_id": event_id,
            "event_time": 1_790_000_000,
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": TEAM_ID,
                    "user_id": BOT_USER_ID,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
        }
    )


def action_body(payload: Mapping[str, Any]) -> str:
    """An interactivity payload as Slack sends it (form field `payload`, JSON inside)."""
    from urllib.parse import urlencode

    return urlencode({"payload": json.dumps(dict(payload))})


SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_TOKEN = "xoxb-0000-test-token"


def pacer_settings(mock: MockSlack, **extra: str) -> Any:
    """Settings for a Pacer that talks to `mock` (the roster has an operator and a member)."""
    from bot.config.settings import load

    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": mock.api_url,
        "PACER_ROSTER": "UOPS=operator,UMEM=member", "PACER_OPS_CHANNEL": "C0OPS", "PACER_MAX_BODY_BYTES": "4096",
        **extra,
    }
    return load(env, toml_path=None)


class SlackClient:
    """Sends signed requests to Pacer's /slack/events as Slack would, and waits for Pacer's work."""

    def __init__(self, base_url: str, surface: Any, mock: MockSlack) -> None:
        import httpx

        self.http = httpx.Client(base_url=base_url, timeout=10)
        self.surface = surface
        self.mock = mock
        self.pacer: Any = None

    def post(
        self, body: str, *, content_type: str = "application/x-www-form-urlencoded", timestamp: int | None = None,
        secret: str = SIGNING_SECRET, retry_num: int | None = None,
    ) -> Any:
        headers = signed_headers(secret, body, timestamp=timestamp, content_type=content_type, retry_num=retry_num)
        return self.http.post("/slack/events", content=body.encode(), headers=headers)

    def command(self, text: str, *, user: str = "UOPS", name: str = "cmd") -> Any:
        return self.post(command_body(text, user=user, response_url=self.mock.response_url(name)))

    def event(self, event: Mapping[str, Any], *, event_id: str, retry_num: int | None = None) -> Any:
        return self.post(event_body(event, event_id=event_id), content_type="application/json", retry_num=retry_num)

    def action(self, payload: Mapping[str, Any]) -> Any:
        return self.post(action_body(payload))

    def settle(self) -> None:
        """Wait until the work acked so far has run (answers built and posted)."""
        assert self.surface.edge.drain(10), "Slack work did not finish in 10 s"

    def close(self) -> None:
        self.http.close()


def make_pacer(engine: Any, clock: Any, deferrer: Any, settings: Any) -> Any:
    """A Pacer runtime in virtual time: the real Context, a virtual worker pool, the production
    notifier chain (so the Slack notifier is wired exactly as `pacer serve` wires it)."""
    from bot.runtime.notify import CompositeNotifier, LogNotifier
    from bot.runtime.process import Pacer
    from scheduler.testing import VirtualWorkers
    from tests.support.harness import context

    ctx = context(
        engine, clock, deferrer, VirtualWorkers(clock, deferrer), wired=False, notifier=CompositeNotifier(LogNotifier())
    )
    return Pacer(settings=settings, engine=engine, clock=clock, deferrer=deferrer, ctx=ctx)


@contextmanager
def serving(engine: Any, clock: Any, deferrer: Any, mock: MockSlack, **extra: str) -> Iterator[SlackClient]:
    """Pacer's whole HTTP app (Slack edge mounted) on loopback, talking to `mock`."""
    from bot.serve.app import create_app

    pacer = make_pacer(engine, clock, deferrer, pacer_settings(mock, **extra))
    app = create_app(pacer, start_scheduler=False)
    server = PacerServer(app).start()
    client = SlackClient(server.url, app.state.slack, mock)
    client.pacer = pacer
    try:
        yield client
    finally:
        client.close()
        server.stop()
