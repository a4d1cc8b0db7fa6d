"""The SQL behind the holds, on SQLite and PostgreSQL alike: JSON lookups of issue sessions,
live operator holds, queue holds per scope, group claims, the weighted load and arrivals."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from scheduler.context import Context, Ports
from scheduler.engine.claims import occupied, occupying
from scheduler.engine.effects import Effects
from scheduler.holds.capacity import arrivals
from scheduler.holds.operator import live_holds
from scheduler.holds.prerequisites import issue_sessions, queue_waits_on, unsatisfied
from scheduler.holds.queue import NewHold, in_force, live_hold, record
from scheduler.holds.view import list_holds
from scheduler.store.models import OperatorHold, Prerequisite, QueueHold, Session, Turn
from scheduler.store.policy import load_policy
from scheduler.store.prerequisite_rows import record_prerequisites

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def add(db, clock, **kw) -> Session:
    kw.setdefault("created_at", clock.now())
    s = Session(**kw)
    db.add(s)
    db.flush()
    return s


def run(db, clock, session: Session) -> None:
    db.add(Turn(session_id=session.id, status="running", created_at=clock.now(), started_at=clock.now()))
    db.flush()


def test_issue_sessions_match_the_repository_and_number_however_they_were_stored(any_db, clock) -> None:
    a = add(any_db, clock, source={"repository": "Acme/API", "issue": 12})
    b = add(any_db, clock, source={"repository": "acme/api", "number": "12"})
    add(any_db, clock, source={"repository": "acme/api", "issue": 120})
    add(any_db, clock, source={"repository": "acme/web", "issue": 12})
    add(any_db, clock, source={"repository": "acme/api", "issue": "twelve"})
    add(any_db, clock, source={})
    assert [s.id for s in issue_sessions(any_db, "ACME/api", 12)] == [a.id, b.id]


def test_prerequisites_are_recorded_once_and_read_back_with_their_state(any_db, clock) -> None:
    target = add(any_db, clock, source={"repository": "acme/api", "issue": 12}, status="blocked")
    waiter = add(any_db, clock, source={"repository": "acme/api", "issue": 13})
    record_prerequisites(any_db, waiter, "depends on #12, #12 and @#14")
    record_prerequisites(any_db, waiter, "depends on #12")
    assert len(any_db.exec(select(Prerequisite)).all()) == 2
    assert [(p.target, p.session_id, p.status) for p in unsatisfied(any_db, waiter.id)] == [
        ("acme/api#12", target.id, "blocked")
    ]
    waiter.status, waiter.hold_reason = "waiting", "prerequisite"
    any_db.add(waiter)
    any_db.flush()
    assert [p.target for p in queue_waits_on(any_db, clock.now())] == ["acme/api#12"]
    target.source = {**target.source, "issue_state": "closed"}
    any_db.add(target)
    any_db.flush()
    assert unsatisfied(any_db, waiter.id) == [] and queue_waits_on(any_db, clock.now()) is None


def test_live_operator_holds_exclude_released_expired_and_armer_ended(any_db, clock) -> None:
    now = clock.now()
    ended = add(any_db, clock, status="done")
    alive = add(any_db, clock, status="running")
    rows = [
        OperatorHold(selector_kind="all", armer="U1", created_at=now),
        OperatorHold(selector_kind="all", armer="U1", created_at=now, expires_at=now + timedelta(minutes=1)),
        OperatorHold(selector_kind="all", armer="U1", created_at=now, expires_at=now),
        OperatorHold(selector_kind="all", armer="U1", created_at=now, released_at=now),
        OperatorHold(selector_kind="all", armer=f"session:{ended.id}", created_at=now),
        OperatorHold(selector_kind="all", armer=f"session:{alive.id}", created_at=now),
    ]
    any_db.add_all(rows)
    any_db.flush()
    assert [h.id for h in live_holds(any_db, now)] == [rows[0].id, rows[1].id, rows[5].id]
    assert [v.id for v in list_holds(any_db, now)] == [rows[0].id, rows[1].id, rows[5].id]


def test_one_queue_hold_per_scope_and_a_new_reason_replaces_it(any_db, clock) -> None:
    now = clock.now()
    effects = Effects()
    g = record(any_db, effects, NewHold("repo:a/b", "task_failed", "s1"), now)
    whole = record(any_db, effects, NewHold(None, "rate_limit", "s2", now + timedelta(minutes=5)), now)
    same = record(any_db, effects, NewHold(None, "rate_limit", "s3", now + timedelta(minutes=10)), now)
    assert same.id == whole.id and same.sentence == "s3"
    assert [e for e, _ in effects.notices].count("queue_hold") == 2  # the update was not announced
    assert [h.id for h in in_force(any_db, now)] == [whole.id, g.id]  # the whole queue first
    assert in_force(any_db, now + timedelta(minutes=10)) == [g]  # its "Resumes at" passed
    replaced = record(any_db, effects, NewHold(None, "auth", "s4"), now)
    assert replaced.id != whole.id and live_hold(any_db, None, now).id == replaced.id
    assert any_db.get(QueueHold, whole.id).released_at == now
    assert live_hold(any_db, "repo:a/b", now).id == g.id and live_hold(any_db, "repo:x/y", now) is None


def test_group_claims_and_the_weighted_load_read_the_running_turns(any_db, clock) -> None:
    now = clock.now()
    a = add(any_db, clock, concurrency_group="repo:a/b", weight=2.0, started_at=now)
    b = add(any_db, clock, concurrency_group="repo:a/b", wake_at=now + timedelta(hours=1), started_at=now)
    add(any_db, clock, concurrency_group="repo:a/b", wake_at=now + timedelta(hours=1))  # never ran: no claim
    c = add(any_db, clock, concurrency_group="repo:c/d", weight=0.5, runtime="free")
    run(any_db, clock, a)
    run(any_db, clock, c)
    assert [s.id for s in occupying(any_db, "repo:a/b", now)] == [a.id, b.id]
    assert [s.id for s in occupying(any_db, "repo:a/b", now, exclude_id=a.id)] == [b.id]
    ctx = Context(ports=Ports(engine=None, clock=clock, deferrer=None, workers=None))  # type: ignore[arg-type]
    ctx.limits.runtimes["free"] = type(ctx.runtime("echo"))("free", spends_quota=False)
    assert occupied(any_db, ctx) == (2.0, 1)  # a runtime that spends nothing is not the gate's fleet


def test_arrivals_are_better_ranked_unstarted_unparked_and_recent(any_db, clock) -> None:
    now = clock.now()
    low = add(any_db, clock, precedence=-10, genesis="api")
    better = add(any_db, clock, precedence=0, genesis="api", created_at=now - timedelta(seconds=10))
    add(any_db, clock, precedence=0, genesis="api", created_at=now - timedelta(seconds=40))  # too old
    add(any_db, clock, precedence=-20, genesis="api")  # ranked below
    add(any_db, clock, precedence=5, genesis="api", hold_reason="fleet_at_cap")  # parked already
    add(any_db, clock, precedence=5, genesis="api", started_at=now)  # started
    urgent = add(any_db, clock, precedence=-50, genesis="command")  # priority outranks any spot
    found = arrivals(any_db, low, load_policy(any_db), now, timedelta(seconds=30))
    assert sorted(s.id for s in found) == sorted([better.id, urgent.id])


def test_a_store_that_cannot_be_read_fails_open_and_the_transaction_goes_on(any_db, clock, caplog) -> None:
    from sqlalchemy import text

    from scheduler.store.db import read_or_fail_open

    kept = add(any_db, clock, title="written before the failed read")
    assert read_or_fail_open(
        any_db, "the hold store", lambda: any_db.exec(text("SELECT * FROM no_such_table")).all(), ["open"]
    ) == ["open"]
    assert "the hold store could not be read" in caplog.text
    # On PostgreSQL a failed statement aborts the transaction; the savepoint keeps it usable.
    assert any_db.get(Session, kept.id).title == "written before the failed read"
    add(any_db, clock, title="written after")
