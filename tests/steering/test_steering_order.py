"""Steering applies in the order it arrives: a hold placed and lifted 20 ms apart is lifted, by a
`/hold` and `/hold cancel` comment or by the `pacer:hold` label added and removed; one person's
back-to-back `/pacer promote`, `demote`, `demote top` end as the last one says.

Real signed deliveries into the real webhook and real signed Slack requests into the real Bolt
app, on SQLite and PostgreSQL; nothing of Pacer's is mocked.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.github.events import IntakeEvent, parse
from bot.github.intake import IntakeSettings, record_github
from bot.github.plan import GithubPlan
from bot.serve.app import create_app
from scheduler.store.db import session_scope
from scheduler.store.models import OperatorHold, Session, Trigger
from scheduler.store.policy import ensure_policy
from tests.conftest import _fresh_postgres
from tests.support.github_support import comment_payload, headers, issue_payload, make_pacer, serving
from tests.support.harness import T0

PAIRS = 20
GAP_SECONDS = 0.020  # between the two deliveries of a pair: the race the scenario is about
_comment_ids = itertools.count(70_001)


class Hook:
    """Pacer's whole app on loopback, taking signed deliveries."""

    def __init__(self, client: httpx.Client, pacer: Any, app: Any) -> None:
        self.client, self.pacer, self.edge = client, pacer, app.state.github

    def send(self, event: str, payload: dict[str, Any]) -> int:
        body = json.dumps(payload).encode()
        return self.client.post("/github/webhook", content=body, headers=headers(event, body)).status_code


@pytest.fixture
def hook(any_engine: Engine, clock: Any, deferrer: Any) -> Iterator[Hook]:
    pacer = make_pacer(any_engine, clock, deferrer, PACER_MAX_SESSIONS="1")
    with DBSession(any_engine) as db:
        db.add(Trigger(name="issues", kind="github_issue", prompt_template="{{ title }}", created_at=clock.now()))
        db.commit()
    app = create_app(pacer, start_scheduler=False)
    with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield Hook(client, pacer, app)


def _comment(body: str, number: int) -> dict[str, Any]:
    payload = comment_payload(body, number=number, commenter="bob", association="MEMBER")
    payload["comment"]["id"] = next(_comment_ids)  # each a comment of its own, as GitHub numbers them
    return payload


def _pairs(
    hook: Hook, place: Callable[[int], tuple[str, dict[str, Any]]], lift: Callable[[int], tuple[str, dict[str, Any]]]
) -> None:
    """Open PAIRS issues, then on each place a hold and lift it GAP_SECONDS later, neither
    delivery waiting for the other's answer."""
    for number in range(1, PAIRS + 1):
        assert hook.send("issues", issue_payload(number=number)) == 202
    assert hook.edge.drain(30)
    with ThreadPoolExecutor(max_workers=2) as pool:
        for number in range(1, PAIRS + 1):
            placed = pool.submit(hook.send, *place(number))
            time.sleep(GAP_SECONDS)  # the gap is the scenario, not a wait for anything
            lifted = pool.submit(hook.send, *lift(number))
            assert (placed.result(), lifted.result()) == (202, 202)
    assert hook.edge.drain(30)


def _holds(engine: Engine) -> list[OperatorHold]:
    with DBSession(engine) as db:
        return list(db.exec(select(OperatorHold).order_by(col(OperatorHold.id))).all())


def _assert_all_lifted(engine: Engine) -> None:
    holds = _holds(engine)
    assert len(holds) == PAIRS  # each pair placed its hold ...
    assert [h.selector_value for h in holds if h.released_at is None] == []  # ... and lifted it
    with DBSession(engine) as db:
        assert db.exec(select(Session.id).where(Session.hold_reason == "operator_hold")).all() == []


def test_hold_then_hold_cancel_20ms_apart_ends_with_no_hold(hook: Hook) -> None:
    _pairs(
        hook,
        lambda n: ("issue_comment", _comment("/hold", n)),
        lambda n: ("issue_comment", _comment("/hold cancel", n)),
    )
    _assert_all_lifted(hook.pacer.engine)


def test_the_hold_label_added_then_removed_20ms_apart_ends_with_no_hold(hook: Hook) -> None:
    _pairs(
        hook,
        lambda n: (
            "issues",
            issue_payload("labeled", number=n, label="pacer:hold", sender="carol", labels=("pacer:hold",)),
        ),
        lambda n: ("issues", issue_payload("unlabeled", number=n, label="pacer:hold", sender="carol")),
    )
    _assert_all_lifted(hook.pacer.engine)


def _record(engine: Engine, event: IntakeEvent) -> GithubPlan:
    with session_scope(engine) as db:
        return record_github(db, event, now=T0, settings=IntakeSettings())


def _parsed(event: str, payload: dict[str, Any]) -> IntakeEvent:
    parsed = parse(event, payload, bot_login="pacer[bot]")
    assert isinstance(parsed, IntakeEvent), parsed
    return parsed


def _waiting_for_a_steering_lock(engine: Engine) -> bool:
    with engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' "
                "AND datname = current_database()"
            )
        )
        return int(found.scalar_one()) > 0


def test_a_lift_recorded_before_its_hold_commits_waits_for_it_and_lifts_it() -> None:
    """The window a fast hold leaves open: the `/hold cancel` delivery's transaction begins
    while the `/hold` one's has not committed (a slow database, another replica). PostgreSQL
    only: SQLite's one writer at a time never lets the two overlap."""
    engine = _fresh_postgres()
    with session_scope(engine) as db:
        ensure_policy(db)
        db.add(Trigger(name="issues", kind="github_issue", prompt_template="{{ title }}", created_at=T0))
    assert _record(engine, _parsed("issues", issue_payload())).created
    placing = DBSession(engine, expire_on_commit=False)
    try:
        placed = record_github(
            placing, _parsed("issue_comment", _comment("/hold", 7)), now=T0, settings=IntakeSettings()
        )
        with ThreadPoolExecutor(max_workers=1) as pool:
            lifting = pool.submit(_record, engine, _parsed("issue_comment", _comment("/hold cancel", 7)))
            deadline = time.monotonic() + 5
            while not _waiting_for_a_steering_lock(engine) and not lifting.done() and time.monotonic() < deadline:
                time.sleep(0.01)
            placing.commit()
            lifted = lifting.result(timeout=10)
    finally:
        placing.close()
    assert [hold_id for _sid, hold_id in placed.holds_placed] == lifted.holds_lifted != []
    assert [h.released_by for h in _holds(engine)] == ["github:bob"]


def _issue_with_a_session(engine: Engine) -> None:
    with session_scope(engine) as db:
        ensure_policy(db)
        db.add(Trigger(name="issues", kind="github_issue", prompt_template="{{ title }}", created_at=T0))
    assert _record(engine, _parsed("issues", issue_payload())).created


def test_a_hold_cancel_that_reaches_pacer_before_its_hold_still_wins(any_engine: Engine) -> None:
    """Two replicas can hand the database a pair in the wrong order: the `/hold cancel` comment,
    written after the `/hold`, is applied first. The person's last word is the later comment,
    so the late `/hold` changes nothing."""
    _issue_with_a_session(any_engine)
    hold, cancel = _comment("/hold", 7), _comment("/hold cancel", 7)
    assert _record(any_engine, _parsed("issue_comment", cancel)).holds_lifted == []
    late = _record(any_engine, _parsed("issue_comment", hold))
    assert late.holds_placed == []
    assert [h for h in _holds(any_engine) if h.released_at is None] == []


def test_a_hold_written_after_a_cancel_stays_when_the_cancel_arrives_last(any_engine: Engine) -> None:
    """The other way round: `/hold cancel`, then `/hold` a moment later, delivered hold first.
    The hold is the last word and stays on."""
    _issue_with_a_session(any_engine)
    cancel, hold = _comment("/hold cancel", 7), _comment("/hold", 7)
    placed = _record(any_engine, _parsed("issue_comment", hold))
    assert len(placed.holds_placed) == 1
    assert _record(any_engine, _parsed("issue_comment", cancel)).holds_lifted == []
    assert [h.released_at for h in _holds(any_engine)] == [None]
