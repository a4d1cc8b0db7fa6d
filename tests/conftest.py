"""Shared fixtures: a real SQLite file per test, and a real PostgreSQL server when
PACER_TEST_DATABASE_URL names one (.ci/run starts it; PACER_REQUIRE_POSTGRES=1 makes its
absence a failure instead of a skip).

The suite runs on every core (pytest-xdist, `-n auto` in pyproject.toml): each worker process
gets a database of its own on that server, and PACER_TEST_DATABASE_URL names it from then on,
so every test of that worker and every process a test starts use it and no other worker's."""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlmodel import Session as DBSession
from sqlmodel import SQLModel

import scheduler.store.models  # noqa: F401
from scheduler.store import db as dbmod
from scheduler.store.caches import forget_kept
from scheduler.store.policy import ensure_policy
from scheduler.store.versions import seed
from scheduler.testing import VirtualClock, VirtualDeferrer
from tests.support.api_client import Api, make_api
from tests.support.custody_support import open_room, require_custody
from tests.support.github_support import FakeGithub
from tests.support.harness import T0
from tests.support.slack_mock import MockSlack, serving

pytest_plugins = ["tests.support.cpu_log"]

_pg_engine: Engine | None = None
_worker_db: tuple[str, str] | None = None  # under xdist: the server's database, and this worker's beside it
NO_POSTGRES = "PostgreSQL not configured (set PACER_TEST_DATABASE_URL)"


def _one_tls_context() -> None:
    """httpx makes a TLS context for every client it builds (`httpx.get` builds one a call), and
    loads the machine's certificate authorities into it: 50 ms of CPU each, measured, though the
    tests speak plain HTTP on loopback, and they build thousands. The default context, made once
    for each place the authorities can come from, serves every client; one asking for another
    verification still gets its own."""
    from httpx._transports import default

    make = default.create_ssl_context
    made: dict[tuple[bool, str | None, str | None], ssl.SSLContext] = {}

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> ssl.SSLContext:
        if verify is not True or cert is not None:
            return make(verify=verify, cert=cert, trust_env=trust_env)
        key = (trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if key not in made:
            made[key] = make(verify=True, cert=None, trust_env=trust_env)
        return made[key]

    default.create_ssl_context = create_ssl_context


_one_tls_context()


def _postgres_url() -> str | None:
    url = os.environ.get("PACER_TEST_DATABASE_URL")
    if not url and os.environ.get("PACER_REQUIRE_POSTGRES") == "1":
        pytest.fail("PACER_REQUIRE_POSTGRES=1 but PACER_TEST_DATABASE_URL is not set")
    return url


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "api(**options): the `api` fixture's fleet and settings, as make_api takes them")
    config.addinivalue_line("markers", "long: takes 20 s or more (real processes, kills, waits); runs first")
    global _worker_db
    worker, base = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PACER_TEST_DATABASE_URL")
    if worker and base:
        _worker_db = (base, f"{base.rsplit('/', 1)[1]}_{worker}")
        _on_server(
            base, f'DROP DATABASE IF EXISTS "{_worker_db[1]}" WITH (FORCE)', f'CREATE DATABASE "{_worker_db[1]}"'
        )
        os.environ["PACER_TEST_DATABASE_URL"] = f"{base.rsplit('/', 1)[0]}/{_worker_db[1]}"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker a core. A third worker was tried (2026-12-07): the suite's timing-bound
    system tests (kills mid-turn, lease races) failed under the extra load, and it was no faster.
    PACER_TEST_WORKERS sets the number outright."""
    return int(os.environ.get("PACER_TEST_WORKERS") or os.cpu_count() or 1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long tests first, each in the order collected. xdist hands out the first quarter of the
    tests in turn to each worker and the rest as workers free up: a long test dealt early runs
    beside the many short ones; dealt last, one worker runs it alone while the other idles."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _sqlite_schema is not None:
        shutil.rmtree(_sqlite_schema.parent, ignore_errors=True)
    if _worker_db is not None:
        if _pg_engine is not None:
            _pg_engine.dispose()
        base, name = _worker_db
        _on_server(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        os.environ["PACER_TEST_DATABASE_URL"] = base


def _on_server(url: str, *statements: str) -> None:
    """Run statements that take no transaction (CREATE and DROP DATABASE) over a connection to `url`."""
    from bot.config.rules import database_url

    admin = dbmod.make_engine(database_url("PACER_TEST_DATABASE_URL", url))
    try:
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        admin.dispose()


def _fresh_postgres() -> Engine:
    global _pg_engine
    url = _postgres_url()
    if not url:
        pytest.skip(NO_POSTGRES)
    if _pg_engine is None:
        from bot.config.rules import database_url

        full = database_url("PACER_TEST_DATABASE_URL", url)
        engine = dbmod.make_engine(full)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
        dbmod.migrate(full)
        _pg_engine = engine
    names = ", ".join(f'"{t.name}"' for t in SQLModel.metadata.sorted_tables)
    with _pg_engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
        seed(conn)  # the TRUNCATE emptied the store versions too; their counters start again
    forget_kept(_pg_engine)  # so a read kept at version 0 in the last test must go
    return _pg_engine


_sqlite_schema: Path | None = None  # an empty store made once a process, copied for each test


def _fresh_sqlite(tmp_path: object) -> Engine:
    """An empty store in the test's own SQLite file: the schema is made once a process and its file
    copied (1 ms) rather than made again for each of the suite's thousands of tests (30 ms of CPU)."""
    global _sqlite_schema
    if _sqlite_schema is None:
        made = Path(tempfile.mkdtemp(prefix="pacer-schema-")) / "pacer.db"
        schema = dbmod.make_engine(f"sqlite:///{made}")
        SQLModel.metadata.create_all(schema)
        schema.dispose()
        _sqlite_schema = made
    shutil.copyfile(_sqlite_schema, f"{tmp_path}/pacer.db")
    return dbmod.make_engine(f"sqlite:///{tmp_path}/pacer.db")


@pytest.fixture(params=["sqlite", "postgres"])
def any_engine(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Engine]:
    """A storage test runs on both backends."""
    engine = _fresh_sqlite(tmp_path) if request.param == "sqlite" else _fresh_postgres()
    with dbmod.session_scope(engine) as db:
        ensure_policy(db)
    yield engine
    if request.param == "sqlite":
        engine.dispose()


@pytest.fixture
def engine(tmp_path: object) -> Iterator[Engine]:
    engine = _fresh_sqlite(tmp_path)
    with dbmod.session_scope(engine) as db:
        ensure_policy(db)
    yield engine
    engine.dispose()


@pytest.fixture
def db(engine: Engine) -> Iterator[DBSession]:
    with dbmod.session_scope(engine) as session:
        yield session


@pytest.fixture
def any_db(any_engine: Engine) -> Iterator[DBSession]:
    with dbmod.session_scope(any_engine) as session:
        yield session


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(T0)


@pytest.fixture
def deferrer(clock: VirtualClock) -> VirtualDeferrer:
    return VirtualDeferrer(clock)


# The Slack tests' shared parts: a loopback mock of Slack's Web API, and the real Bolt app
# served over it (tests/support/slack_mock.py).
@pytest.fixture
def mock() -> Iterator[MockSlack]:
    slack = MockSlack().start()
    yield slack
    slack.stop()


@pytest.fixture
def slack(engine: Engine, clock, deferrer, mock: MockSlack):  # type: ignore[no-untyped-def]
    with serving(engine, clock, deferrer, mock) as client:
        yield client


@pytest.fixture
def api(request: pytest.FixtureRequest, engine: Engine, clock: VirtualClock) -> Iterator[Api]:
    """The REST API over loopback on the harness, on SQLite (tests/support/api_client.py). A module
    that wants another fleet or setting says so once: `pytestmark = pytest.mark.api(max_sessions=1)`."""
    marker = request.node.get_closest_marker("api")
    served = make_api(engine, clock, **(marker.kwargs if marker else {}))
    yield served
    served.close()


@pytest.fixture
def github() -> Iterator[FakeGithub]:
    """GitHub's REST API as a fake on loopback (tests/support/github_support.py)."""
    fake = FakeGithub().start()
    yield fake
    fake.stop()


@pytest.fixture
def room() -> Iterator[Path]:
    """Where the agents' programs and working trees live, reachable by the agent user; the test
    skips where this machine cannot hold an agent in custody."""
    require_custody()
    with open_room() as room:
        yield room


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say out loud that the PostgreSQL half of the storage tests did not run: an `s` among the
    dots is easy to miss, and those tests are where SQLite and PostgreSQL differ."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if NO_POSTGRES in str(getattr(r, "longrepr", ""))]
    if skipped:
        terminalreporter.write_line(
            f"{len(skipped)} test{'s' if len(skipped) != 1 else ''} skipped: {NO_POSTGRES}. Run them as the README's "
            f"PostgreSQL section says; "
            "PACER_REQUIRE_POSTGRES=1 makes this a failure.",
            yellow=True,
        )
