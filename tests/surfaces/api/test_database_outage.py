"""A database outage under a running app: the API answers 503 with its JSON error and
Retry-After, never a bare 500, and recovers by itself once the database is back.

The test runs its own PostgreSQL server (the shared test server is not ours to stop), stops it
with `pg_ctl stop -m fast` under the real app serving real HTTP, and starts it again."""

from __future__ import annotations

import glob
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduler.store import db as dbmod
from tests.support.api_client import make_api
from tests.support.paths import ROOT


@dataclass
class Postgres:
    url: str
    data: Path
    port: int
    bindir: str

    def _ctl(self, *args: str) -> None:
        runas = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(
            [*runas, f"{self.bindir}/pg_ctl", "-D", str(self.data), *args], check=True, capture_output=True, timeout=60
        )

    def stop(self) -> None:
        self._ctl("-m", "fast", "-w", "stop")

    def start(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data.parent} -c fsync=off"
        self._ctl("-l", str(self.data.parent / "server.log"), "-w", "-t", "60", "-o", options, "start")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def postgres() -> Iterator[Postgres]:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        pytest.skip("no PostgreSQL server binaries (scripts/start-postgres.sh installs them)")
    port = _free_port()
    # Directly under /tmp: run as root, the server runs as `postgres`, who cannot enter pytest's tmp_path.
    where = Path(tempfile.gettempdir()) / f"pacer-outage-{uuid.uuid4().hex[:12]}"
    out = subprocess.run(
        [str(ROOT / "scripts/start-postgres.sh"), str(where), str(port)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    url = out.split("PACER_TEST_DATABASE_URL=", 1)[1].split()[0].replace("postgresql://", "postgresql+psycopg://")
    server = Postgres(url, where / "data", port, os.path.dirname(found[-1]))
    yield server
    try:
        server.stop()
    except subprocess.CalledProcessError:
        pass  # already stopped
    shutil.rmtree(where, ignore_errors=True)


def test_the_api_answers_503_with_retry_after_while_the_database_is_down_and_recovers(
    postgres: Postgres, clock, caplog
) -> None:
    dbmod.migrate(postgres.url)
    engine = dbmod.make_engine(postgres.url)
    api = make_api(engine, clock)
    try:
        assert api.post("/sessions", {"prompt": "before the outage"}).status_code == 201
        postgres.stop()
        caplog.set_level(logging.WARNING, logger="pacer.api")
        for method, path, body in [("GET", "/sessions", None), ("POST", "/sessions", {"prompt": "during"}),
                                   ("GET", "/sessions/1", None), ("PATCH", "/policy", {"max_sessions": 3})]:
            answer = api.call(method, path, json=body)
            assert answer.status_code == 503, (method, path, answer.text)
            assert answer.headers["retry-after"] == "5"
            assert answer.headers["content-type"] == "application/json"
            said = answer.json()
            assert said["error"] == "unavailable" and "database cannot be reached" in said["message"], said
        warned = [r for r in caplog.records if r.name == "pacer.api"]
        assert warned and all(r.exc_info is None for r in warned)  # one line each, no traceback
        assert "the database cannot be reached" in warned[0].getMessage()

        postgres.start()
        deadline = time.monotonic() + 20
        while (answer := api.get("/sessions")).status_code != 200 and time.monotonic() < deadline:
            threading.Event().wait(0.1)
        assert answer.status_code == 200 and answer.json()["count"] == 1, answer.text
        assert api.post("/sessions", {"prompt": "after the outage"}).status_code == 201
        assert api.get("/sessions").json()["count"] == 2
    finally:
        api.close()
        engine.dispose()
