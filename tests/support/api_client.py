"""The REST API under test: the real FastAPI app under a real uvicorn on a loopback port, over a
real SQLite file, driven by real HTTP requests (httpx), with the scheduler in virtual time
(tests/harness): requests run one at a time, and the test moves the clock between them."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import uvicorn
from sqlalchemy import Engine

from bot.config.settings import Settings, load
from bot.runtime.process import Pacer
from bot.serve.app import create_app
from scheduler.context import Context
from scheduler.testing import VirtualClock, VirtualDeferrer, VirtualWorkers
from tests.support.harness import SetQuota, build

TOKEN = "test-token-0123456789"  # the shared token: automation, audited as "api token"
ROSTER = "alice=operator,bob=member,carol=member"
# Each rostered person's own token: a call `as` someone sends theirs.
PERSONAL = {name: f"{name}-token-0123456789" for name in ("alice", "bob", "carol")}
PERSONAL_TOKENS = ",".join(f"{name}={token}" for name, token in PERSONAL.items())


class Server:
    """`app` under uvicorn in a thread, on a free 127.0.0.1 port."""

    def __init__(self, app: Any, *, lifespan: str = "off", **options: Any) -> None:
        self.app = app
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = {"log_level": "warning", "access_log": False, **options}
        self._server = uvicorn.Server(uvicorn.Config(app, lifespan=lifespan, **config))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name="pacer-http", daemon=True
        )

    def start(self) -> Server:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Tell uvicorn to stop. With a lifespan (the scheduler, the edges), wait until it has run
        its end; without one nothing of Pacer's runs any more, and the test goes on while uvicorn
        winds down its loop (up to 0.2 s of sleeps, each test's teardown waited them out)."""
        self._server.should_exit = True
        if self._server.config.lifespan != "off":
            self._thread.join(timeout=10)
            self._sock.close()


@dataclass
class Api:
    client: httpx.Client
    server: Server
    pacer: Pacer
    ctx: Context
    deferrer: VirtualDeferrer
    workers: VirtualWorkers
    quota: SetQuota

    def headers(self, actor: str | None = None, token: str | None = TOKEN) -> dict[str, str]:
        """A call as `actor` carries their own token (and names them); without one, the shared
        token, which then names someone it cannot speak for."""
        out = {}
        if token == TOKEN and actor in PERSONAL:
            token = PERSONAL[actor]
        if token is not None:
            out["Authorization"] = f"Bearer {token}"
        if actor is not None:
            out["X-Pacer-Actor"] = actor
        return out

    def call(self, method: str, path: str, *, actor: str | None = None, token: str | None = TOKEN, **kw: Any) -> Any:
        return self.client.request(method, f"/api/v1{path}", headers=self.headers(actor, token), **kw)

    def get(self, path: str, **kw: Any) -> Any:
        return self.call("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return self.call("POST", path, json=body, **kw)

    def patch(self, path: str, body: Any = None, **kw: Any) -> Any:
        return self.call("PATCH", path, json=body, **kw)

    def delete(self, path: str, **kw: Any) -> Any:
        return self.call("DELETE", path, **kw)

    def close(self) -> None:
        self.client.close()
        self.server.stop()

    def settle(self) -> int:
        """Run the alarms that are due now (releases, session events, queue passes)."""
        return self.deferrer.advance(timedelta(0))


def settings_for(engine: Engine, **extra: str) -> Settings:
    """The harness's deployment: its automation (the shared token) is an operator, as the API
    tests' token holder has always acted, and each rostered person has a token of their own."""
    environ = {"DATABASE_URL": str(engine.url), "PACER_API_TOKEN": TOKEN, "PACER_ROSTER": ROSTER,
               "PACER_API_TOKENS": PERSONAL_TOKENS, "PACER_API_ROLE": "operator", **extra}
    return load({k: v for k, v in environ.items() if v is not None})


def make_api(
    engine: Engine, clock: VirtualClock, *, max_sessions: int = 2, turn_minutes: float = 20, **extra: str
) -> Api:
    ctx, deferrer, workers, quota = build(
        engine, clock, max_sessions=max_sessions, turn_minutes=turn_minutes, wired=True
    )
    pacer = Pacer(settings=settings_for(engine, **extra), engine=engine, clock=clock, deferrer=deferrer, ctx=ctx)
    server = Server(create_app(pacer, start_scheduler=False)).start()
    client = httpx.Client(base_url=server.url, timeout=30)
    return Api(client, server, pacer, ctx, deferrer, workers, quota)
