"""Quota sources behind the QuotaSource port: the ledger (own turn costs, on SQLite and
PostgreSQL), the pool (per-account JSON from a file or a real loopback HTTP server), the
documented format's bad inputs, and the factory."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import select

from bot.config.settings import load
from bot.runtime.adapters import build_quota_source
from integrations.quota.ledger import LedgerSource
from integrations.quota.pool_source import PoolSource
from scheduler.rules.windows import window_bounds
from scheduler.store import db as dbmod
from scheduler.store.models import Session, Turn

ANCHOR = datetime(2026, 1, 5, tzinfo=UTC)
# A Monday 09:00: the 7d window began 2026-11-02 00:00 (anchor + 43 weeks), the 5h one at 06:00.
NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
H = timedelta(hours=1)
M = timedelta(minutes=1)


@pytest.mark.parametrize(
    ("rule", "period", "now", "start", "resets_at"),
    [
        ("at the anchor a window starts", 5 * H, ANCHOR, ANCHOR, ANCHOR + 5 * H),
        ("window k resets at anchor + k x period", 5 * H, ANCHOR + 12 * H, ANCHOR + 10 * H, ANCHOR + 15 * H),
        ("a boundary belongs to the window it opens", 5 * H, ANCHOR + 10 * H, ANCHOR + 10 * H, ANCHOR + 15 * H),
        ("before the anchor the schedule runs backwards", 5 * H, ANCHOR - H, ANCHOR - 5 * H, ANCHOR),
        (
            "the weekly schedule",
            timedelta(days=7),
            NOW,
            datetime(2026, 11, 2, tzinfo=UTC),
            datetime(2026, 11, 9, tzinfo=UTC),
        ),
        (
            "5-hour windows straddle weekly boundaries",
            5 * H,
            NOW,
            datetime(2026, 11, 2, 6, tzinfo=UTC),
            datetime(2026, 11, 2, 11, tzinfo=UTC),
        ),
    ],
)
def test_window_bounds(rule, period, now, start, resets_at) -> None:
    assert window_bounds(ANCHOR, period, now) == (start, resets_at), rule


def test_window_bounds_refuses_a_period_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="period must be positive"):
        window_bounds(ANCHOR, timedelta(0), NOW)


# --- the ledger, on both databases ----------------------------------------------------------------


def add_turn(
    engine: Engine,
    *,
    runtime: str = "claude_code",
    status: str = "done",
    cost: float = 0.0,
    started: datetime | None = None,
    finished: datetime | None = None,
    seconds: float | None = None,
) -> None:
    with dbmod.session_scope(engine) as db:
        session = Session(title="s", runtime=runtime, created_at=NOW - 30 * H)
        db.add(session)
        db.flush()
        db.add(
            Turn(
                session_id=session.id,
                runtime=runtime,
                status=status,
                cost_usd=cost,
                duration_ms=None if seconds is None else int(seconds * 1000),
                created_at=NOW - 30 * H,
                started_at=started,
                finished_at=finished,
            )
        )


def ledger(engine: Engine, **kw: Any) -> LedgerSource:
    return LedgerSource(engine, capacity_5h_usd=50.0, capacity_7d_usd=600.0, anchor=ANCHOR, **kw)


def windows(reading: Any) -> dict[str, Any]:
    return {w.name: w for w in reading.windows}


def test_ledger_with_no_turns_reads_both_windows_empty_and_calibrated(any_engine: Engine) -> None:
    w = windows(ledger(any_engine).read(NOW))
    assert w["5h"].resets_at == datetime(2026, 11, 2, 11, tzinfo=UTC)
    assert w["7d"].resets_at == datetime(2026, 11, 9, tzinfo=UTC)
    assert (w["5h"].capacity_usd, w["5h"].spent_usd, w["5h"].utilization) == (50.0, 0.0, 0.0)
    assert (w["7d"].capacity_usd, w["7d"].period_seconds) == (600.0, 7 * 24 * 3600)


@pytest.mark.parametrize(
    ("rule", "turn", "spent_5h", "spent_7d"),
    [
        ("a turn finished inside both windows counts in both", {"cost": 5.0, "finished": NOW - 30 * M}, 5.0, 5.0),
        (
            "a turn finished before the 5-hour window counts only in the week",
            {"cost": 5.0, "finished": NOW - 4 * H},
            0.0,
            5.0,
        ),
        ("a turn finished in last week's window counts in neither", {"cost": 5.0, "finished": NOW - 10 * H}, 0.0, 0.0),
        ("a failed turn's spend is spent", {"cost": 2.0, "status": "failed", "finished": NOW - M}, 2.0, 2.0),
        ("a turn finishing after now is not in the reading yet", {"cost": 5.0, "finished": NOW + M}, 0.0, 0.0),
        ("a queued turn has spent nothing", {"cost": 0.0, "status": "queued"}, 0.0, 0.0),
        (
            "a running turn accrues elapsed minutes x its runtime's rate",
            {"runtime": "echo", "status": "running", "started": NOW - 10 * M},
            15.0,
            15.0,
        ),
        (
            "a running turn begun before the window accrues only inside it",
            {"runtime": "echo", "status": "running", "started": NOW - 4 * H},
            270.0,
            360.0,
        ),
    ],
)
def test_ledger_spend(rule, turn, spent_5h, spent_7d, any_engine: Engine) -> None:
    add_turn(any_engine, **turn)
    w = windows(ledger(any_engine, fallbacks={"echo": 1.5}).read(NOW))
    assert (w["5h"].spent_usd, w["7d"].spent_usd) == (pytest.approx(spent_5h), pytest.approx(spent_7d)), rule
    assert w["5h"].utilization == pytest.approx(spent_5h / 50.0), rule


# The 5-hour window opened at 06:00 and the week at 00:00 (NOW is 09:00 on the week's first day).
WINDOW_5H = datetime(2026, 11, 2, 6, tzinfo=UTC)


@pytest.mark.parametrize(
    ("rule", "turn", "spent_5h", "spent_7d"),
    [
        (
            "a turn that began before the 5-hour window counts there only for its run after the start",
            {"cost": 12.0, "started": WINDOW_5H - H, "finished": WINDOW_5H + H},
            6.0,
            12.0,
        ),
        (
            "split by time: a quarter of its run inside, a quarter of its cost",
            {"cost": 8.0, "started": WINDOW_5H - 90 * M, "finished": WINDOW_5H + 30 * M},
            2.0,
            8.0,
        ),
        (
            "a turn that began in last week's window is split at the week's start too",
            {
                "cost": 8.0,
                "started": datetime(2026, 11, 1, 23, tzinfo=UTC),
                "finished": datetime(2026, 11, 2, 1, tzinfo=UTC),
            },
            0.0,
            4.0,
        ),
        (
            "a turn that ended at the window's start spent all of it before",
            {"cost": 5.0, "started": WINDOW_5H - H, "finished": WINDOW_5H},
            0.0,
            5.0,
        ),
        (
            "a turn with no recorded start is booked where it finished",
            {"cost": 5.0, "finished": WINDOW_5H + H},
            5.0,
            5.0,
        ),
    ],
)
def test_a_turn_that_straddles_a_windows_start_is_split_there(
    rule, turn, spent_5h, spent_7d, any_engine: Engine
) -> None:
    add_turn(any_engine, **turn)
    w = windows(ledger(any_engine).read(NOW))
    assert (w["5h"].spent_usd, w["7d"].spent_usd) == (pytest.approx(spent_5h), pytest.approx(spent_7d)), rule


def test_a_turn_running_across_the_start_is_split_when_it_finishes_later(any_engine: Engine) -> None:
    """The ledger notes the turns running across a window's start on the reads it makes anyway,
    and splits each one when it has finished: a long-lived source gives the same answer as a
    fresh one, which finds the finished ones with a scan."""
    source = ledger(any_engine, fallbacks={"echo": 1.5})
    add_turn(any_engine, runtime="echo", status="running", started=WINDOW_5H - H)
    running = windows(source.read(NOW))
    assert running["5h"].spent_usd == pytest.approx(3 * 60 * 1.5)  # accrued since 06:00 only
    with dbmod.session_scope(any_engine) as db:
        turn = db.exec(select(Turn)).one()
        turn.status, turn.cost_usd, turn.finished_at = "done", 40.0, NOW - H  # ran 05:00-08:00
    for source_now in (source, ledger(any_engine)):
        w = windows(source_now.read(NOW))
        assert (w["5h"].spent_usd, w["7d"].spent_usd) == (pytest.approx(40.0 * 2 / 3), pytest.approx(40.0))


def test_a_running_turn_accrues_at_its_runtimes_measured_rate(any_engine: Engine) -> None:
    add_turn(any_engine, cost=6.0, finished=NOW - 4 * H, seconds=120)  # $3/min on claude_code
    add_turn(any_engine, status="running", started=NOW - 4 * M)
    w = windows(ledger(any_engine).read(NOW))
    assert w["5h"].spent_usd == pytest.approx(12.0)
    assert w["7d"].spent_usd == pytest.approx(18.0)


def test_ledger_reads_inside_the_callers_transaction(any_engine: Engine) -> None:
    add_turn(any_engine, cost=4.0, finished=NOW - M)
    with dbmod.session_scope(any_engine) as db:
        assert windows(ledger(any_engine).read_in(db, NOW))["5h"].spent_usd == pytest.approx(4.0)


def test_ledger_spent_since_is_what_pool_calibration_reads(any_engine: Engine) -> None:
    add_turn(any_engine, cost=4.0, finished=NOW - 3 * H)
    add_turn(any_engine, cost=1.0, finished=NOW - M)
    assert ledger(any_engine).spent_since(NOW - 4 * H, NOW) == pytest.approx(5.0)


@pytest.mark.parametrize(
    ("rule", "kw", "message"),
    [
        (
            "a 5-hour capacity must be positive",
            {"capacity_5h_usd": 0.0},
            r"capacity_5h_usd must be above 0 \(got 0.0\)",
        ),
        ("an anchor must carry its zone", {"anchor": datetime(2026, 1, 5)}, "anchor must be timezone-aware"),
    ],
)
def test_ledger_refuses_bad_configuration(rule, kw, message, engine: Engine) -> None:
    args: dict[str, Any] = {"capacity_5h_usd": 50.0, "capacity_7d_usd": 600.0, "anchor": ANCHOR}
    args.update(kw)
    with pytest.raises(ValueError, match=message):
        LedgerSource(engine, **args)


# --- the pool: file ---------------------------------------------------------------------------------


def account(name: str, u5: float | None, u7: float | None, **kw: Any) -> dict[str, Any]:
    return {"name": name, "status": kw.pop("status", "active"), "utilization_5h": u5, "utilization_7d": u7, **kw}


def pool_file(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "pool.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def iso(at: datetime) -> str:
    return at.isoformat()


def test_incident_693_through_the_pool_file_does_not_hold_on_the_5_hour_window(tmp_path: Path) -> None:
    accounts = [account(f"spent-{i}", 0.0, 1.0, status="quota_exceeded") for i in range(2)]
    accounts += [account(f"ok-{i}", 0.0, 0.5) for i in range(5)]
    reading = PoolSource(file=pool_file(tmp_path, accounts)).read(NOW)
    assert reading is not None
    w = windows(reading)
    assert w["5h"].utilization == 0.0, "not 2/7 = 28.57%"
    assert w["7d"].utilization == pytest.approx(4.5 / 7)
    assert reading.accounts_averaged == 7
    assert len(reading.accounts) == 7


def test_pool_windows_reset_at_the_soonest_recorded_reset_else_within_one_period(tmp_path: Path) -> None:
    data = {"accounts": [
        account("a", 0.5, 0.2, reset_5h=iso(NOW + 2 * H), reset_7d=None),
        account("b", 0.1, 0.4, reset_5h=iso(NOW + H)),
    ]}
    w = windows(PoolSource(file=pool_file(tmp_path, data)).read(NOW))
    assert w["5h"].resets_at == NOW + H
    assert w["7d"].resets_at == NOW + timedelta(days=7), "no reset recorded: now + period, the latest it can be"
    assert w["5h"].capacity_usd is None and w["5h"].spent_usd is None, "fraction mode"


@pytest.mark.parametrize(
    ("rule", "accounts", "capacity_5h", "capacity_7d"),
    [
        (
            "every averaged account priced: the pool's capacity is their sum",
            [
                account("a", 0.5, 0.5, capacity_5h_usd=40, capacity_7d_usd=400),
                account("b", 0.1, 0.5, capacity_5h_usd=60, capacity_7d_usd=400),
            ],
            100.0,
            800.0,
        ),
        (
            "one averaged account unpriced: fraction mode, never a partial sum",
            [account("a", 0.5, 0.5, capacity_5h_usd=40), account("b", 0.1, 0.5)],
            None,
            None,
        ),
        (
            "a week-spent account left out of the 5-hour figure need not be priced for it",
            [
                account("a", 0.5, 0.5, capacity_5h_usd=40, capacity_7d_usd=400),
                account("b", 0.1, 1.0, capacity_7d_usd=400),
            ],
            40.0,
            800.0,
        ),
    ],
)
def test_pool_capacity_from_the_file(rule, accounts, capacity_5h, capacity_7d, tmp_path: Path) -> None:
    w = windows(PoolSource(file=pool_file(tmp_path, accounts)).read(NOW))
    assert (w["5h"].capacity_usd, w["7d"].capacity_usd) == (capacity_5h, capacity_7d), rule
    if capacity_5h is not None:
        assert w["5h"].spent_usd == pytest.approx(w["5h"].utilization * capacity_5h), rule


@pytest.mark.parametrize(
    ("rule", "u5", "spent", "capacity"),
    [
        ("measurable: the ledger's spend over the pooled utilization", 0.25, 10.0, 40.0),
        ("under 5% utilization: fraction mode", 0.04, 10.0, None),
        ("no spend recorded: fraction mode", 0.5, 0.0, None),
    ],
)
def test_pool_calibrates_against_the_ledger(rule, u5, spent, capacity, tmp_path: Path) -> None:
    calls: list[tuple[datetime, datetime]] = []

    def spent_since(start: datetime, now: datetime) -> float:
        calls.append((start, now))
        return spent

    data = [account("a", u5, 0.5, reset_5h=iso(NOW + 2 * H), reset_7d=iso(NOW + 3 * 24 * H))]
    w = windows(PoolSource(file=pool_file(tmp_path, data), spent_since=spent_since).read(NOW))
    assert w["5h"].capacity_usd == (None if capacity is None else pytest.approx(capacity)), rule
    assert (NOW - 3 * H, NOW) in calls, "spend is read from when the window began"


def test_pool_calibration_keeps_one_observation_per_window_and_takes_the_median(tmp_path: Path) -> None:
    spend = {"now": 10.0}
    path = tmp_path / "pool.json"
    source = PoolSource(file=path, spent_since=lambda start, now: spend["now"])

    def read(u5: float, reset: datetime, at: datetime) -> float | None:
        path.write_text(json.dumps([account("a", u5, 0.5, reset_5h=iso(reset))]))
        reading = source.read(at)
        assert reading is not None
        return windows(reading)["5h"].capacity_usd

    assert read(0.25, NOW + H, NOW) == pytest.approx(40.0)
    spend["now"] = 20.0
    assert read(0.5, NOW + H, NOW + M) == pytest.approx(40.0), "same window: the later observation replaces"
    spend["now"] = 30.0
    assert read(0.5, NOW + 6 * H, NOW + 2 * H) == pytest.approx(50.0), "median of 40 and 60"
    spend["now"] = 5.0
    assert read(0.1, NOW + 11 * H, NOW + 7 * H) == pytest.approx(50.0), "median of 40, 60, 50"


def test_pool_calibrated_against_a_real_ledger(any_engine: Engine, tmp_path: Path) -> None:
    add_turn(any_engine, cost=12.0, finished=NOW - H)
    source = PoolSource(file=pool_file(tmp_path, [account("a", 0.3, 0.2, reset_5h=iso(NOW + 2 * H))]),
                        spent_since=ledger(any_engine).spent_since)
    w = windows(source.read(NOW))
    assert w["5h"].capacity_usd == pytest.approx(40.0)
    assert w["7d"].capacity_usd is None, "no 7-day reset: when the week began is unknown, so unpriced"


# --- the pool: what fails open ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "content", "logged"),
    [
        ("not JSON", "{nope", "JSONDecodeError"),
        ("the top level is neither a list nor {accounts: [...]}", {"nope": 1}, "top level: must be a list of accounts"),
        ("an account that is not an object", [3], "accounts[0]: must be an object (got 3)"),
        ("a missing name", [{"status": "active"}], "accounts[0].name: must be a non-empty string (got None)"),
        (
            "a duplicated name",
            [account("a", 0.1, 0.1), account("a", 0.2, 0.2)],
            "accounts[1].name: 'a' appears more than once",
        ),
        (
            "an unknown status",
            [account("a", 0.1, 0.1, status="paused")],
            "accounts[0].status: must be one of active, quota_exceeded, needs_reauth (got 'paused')",
        ),
        (
            "a utilization that is not a number",
            [account("a", "12%", 0.1)],
            "accounts[0].utilization_5h: must be a number >= 0 or null (got '12%')",
        ),
        (
            "a negative utilization",
            [account("a", 0.1, -0.2)],
            "accounts[0].utilization_7d: must be a number >= 0 or null (got -0.2)",
        ),
        (
            "a boolean is not a utilization",
            [account("a", True, 0.1)],
            "accounts[0].utilization_5h: must be a number >= 0 or null (got True)",
        ),
        (
            "a reset with no offset",
            [account("a", 0.1, 0.1, reset_5h="2026-11-02T12:00:00")],
            "accounts[0].reset_5h: must be an ISO-8601 instant with a UTC offset, or null (got '2026-11-02T12:00:00', "
            "which has no offset)",
        ),
        (
            "a reset that is not a date",
            [account("a", 0.1, 0.1, reset_7d="tomorrow")],
            "accounts[0].reset_7d: must be an ISO-8601 instant with a UTC offset, or null (got 'tomorrow')",
        ),
        (
            "a capacity of zero",
            [account("a", 0.1, 0.1, capacity_5h_usd=0)],
            "accounts[0].capacity_5h_usd: must be a number above 0 or null (got 0)",
        ),
        ("no account has a readable window", [account("a", None, None)], "none of 1 accounts has a readable window"),
        ("an empty pool", [], "none of 0 accounts has a readable window"),
    ],
)
def test_an_unreadable_pool_fails_open_and_says_why(
    rule, content, logged, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = pool_file(tmp_path, content)
    with caplog.at_level(logging.WARNING, logger="pacer.quota.pool"):
        assert PoolSource(file=path).read(NOW) is None, rule
    assert len(caplog.records) == 1, rule
    assert logged in caplog.records[0].getMessage(), rule
    assert str(path) in caplog.records[0].getMessage(), rule


def test_a_missing_file_fails_open_naming_the_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pacer.quota.pool"):
        assert PoolSource(file=tmp_path / "absent.json").read(NOW) is None
    assert "absent.json" in caplog.text and "FileNotFoundError" in caplog.text


def test_the_same_problem_is_logged_once_until_it_changes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = pool_file(tmp_path, "{nope")
    source = PoolSource(file=path)
    with caplog.at_level(logging.WARNING, logger="pacer.quota.pool"):
        for _ in range(3):
            assert source.read(NOW) is None
        path.write_text("[3]")
        assert source.read(NOW) is None
        path.write_text(json.dumps([account("a", 0.1, 0.1)]))
        assert source.read(NOW) is not None
        path.write_text("[3]")
        assert source.read(NOW) is None
    assert len(caplog.records) == 3, "one line per distinct problem, again after a good read"


def test_pool_source_needs_exactly_one_place_to_read() -> None:
    with pytest.raises(ValueError, match="exactly one of file= or url="):
        PoolSource()
    with pytest.raises(ValueError, match="exactly one of file= or url="):
        PoolSource(file="a.json", url="http://127.0.0.1:1/")


# --- the pool: HTTP, against a real loopback server ---------------------------------------------------


class PoolEndpoint:
    """A loopback HTTP server answering GET with whatever the test sets."""

    def __init__(self) -> None:
        self.status = 200
        self.body: bytes = b"[]"
        self.delay = 0.0
        self.requests = 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                endpoint.requests += 1
                if endpoint.delay:
                    time.sleep(endpoint.delay)
                self.send_response(endpoint.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(endpoint.body)))
                self.end_headers()
                try:
                    self.wfile.write(endpoint.body)
                except OSError:
                    pass  # the client gave up (the timeout test)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/pool"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def serve(self, data: Any, status: int = 200) -> None:
        self.status = status
        self.body = data if isinstance(data, bytes) else json.dumps(data).encode()


@pytest.fixture
def endpoint() -> Iterator[PoolEndpoint]:
    ep = PoolEndpoint()
    ep.thread.start()
    yield ep
    ep.server.shutdown()
    ep.server.server_close()


def test_pool_over_http_reads_the_same_format(endpoint: PoolEndpoint) -> None:
    endpoint.serve({"accounts": [account("a", 0.2, 0.4, status="needs_reauth"), account("b", 0.6, 1.0)]})
    reading = PoolSource(url=endpoint.url).read(NOW)
    assert reading is not None
    w = windows(reading)
    assert (w["5h"].utilization, w["7d"].utilization) == (pytest.approx(0.2), pytest.approx(0.7))
    assert endpoint.requests == 1


@pytest.mark.parametrize(
    ("rule", "status", "body", "delay", "logged"),
    [
        ("a server error fails open naming the status", 503, b"[]", 0.0, "503"),
        ("a body that is not JSON fails open", 200, b"<html>", 0.0, "JSONDecodeError"),
        (
            "a body in the wrong format fails open naming the field",
            200,
            b'[{"name": "a", "status": "x"}]',
            0.0,
            "accounts[0].status",
        ),
        ("a server slower than the timeout fails open", 200, b"[]", 0.4, "Timeout"),
    ],
)
def test_pool_over_http_fails_open(
    rule, status, body, delay, logged, endpoint: PoolEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint.serve(body, status)
    endpoint.delay = delay
    with caplog.at_level(logging.WARNING, logger="pacer.quota.pool"):
        assert PoolSource(url=endpoint.url, timeout=0.1).read(NOW) is None, rule
    assert len(caplog.records) == 1 and logged in caplog.text and endpoint.url in caplog.text, rule


def test_a_refused_connection_fails_open(endpoint: PoolEndpoint, caplog: pytest.LogCaptureFixture) -> None:
    url = endpoint.url
    endpoint.server.shutdown()
    endpoint.server.server_close()
    with caplog.at_level(logging.WARNING, logger="pacer.quota.pool"):
        assert PoolSource(url=url, timeout=0.5).read(NOW) is None
    assert "ConnectError" in caplog.text


# --- the factory -------------------------------------------------------------------------------------


def test_build_quota_source_defaults_to_the_ledger(engine: Engine) -> None:
    settings = load({"PACER_WINDOW_5H_USD": "20", "PACER_ECHO_COST_USD": "0.1", "PACER_ECHO_SECONDS": "6"})
    source = build_quota_source(settings, engine)
    assert isinstance(source, LedgerSource)
    add_turn(engine, runtime="echo", status="running", started=NOW - 2 * M)
    w = windows(source.read(NOW))
    assert w["5h"].capacity_usd == 20.0
    assert w["5h"].spent_usd == pytest.approx(2 * 1.0), "echo's rate: $0.10 per 6 s = $1/min"


def test_build_quota_source_pool_from_a_file(engine: Engine, tmp_path: Path) -> None:
    path = pool_file(tmp_path, [account("a", 0.5, 0.25, reset_5h=iso(NOW + H))])
    add_turn(engine, cost=5.0, finished=NOW - M)
    source = build_quota_source(load({"PACER_QUOTA_SOURCE": "pool", "PACER_POOL_FILE": str(path)}), engine)
    assert isinstance(source, PoolSource) and source.file == path
    assert windows(source.read(NOW))["5h"].capacity_usd == pytest.approx(10.0), "calibrated on the ledger"


def test_build_quota_source_pool_prefers_the_url(engine: Engine, endpoint: PoolEndpoint) -> None:
    endpoint.serve([account("a", 0.5, 0.25)])
    settings = load({"PACER_QUOTA_SOURCE": "pool", "PACER_POOL_URL": endpoint.url, "PACER_POOL_FILE": "/absent.json"})
    source = build_quota_source(settings, engine)
    assert isinstance(source, PoolSource) and source.url is not None
    assert source.read(NOW) is not None
