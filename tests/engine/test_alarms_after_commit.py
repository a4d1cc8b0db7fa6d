"""Alarms and notices leave a transaction only once it has committed. On SQLite an alarm armed
inside one deadlocked: APScheduler's job store shares the file and waited 30 s behind the
transaction that was waiting for it. The Context refuses such a call outright, so a path that
tries it fails in every test rather than hanging in production."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.context import in_transaction
from scheduler.errors import AlarmInTransaction
from scheduler.store.db import session_scope
from scheduler.store.models import Session
from tests.support import harness


def test_an_alarm_inside_a_transaction_is_refused_and_after_commit_is_armed(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = harness.build(engine, clock)
    with session_scope(engine) as db:
        db.get(Session, 1)  # the transaction is open once it has read
        assert in_transaction(engine)
        with pytest.raises(AlarmInTransaction, match="after commit"):
            ctx.schedule("recheck:1", clock.now(), "queue_pass")
        with pytest.raises(AlarmInTransaction):
            ctx.cancel_alarm("recheck:1")
        with pytest.raises(AlarmInTransaction):
            ctx.alarm_at("recheck:1")
        with pytest.raises(AlarmInTransaction):
            ctx.emit("done", session_id=1)
    assert not in_transaction(engine)
    ctx.schedule("recheck:1", clock.now() + timedelta(minutes=1), "queue_pass")
    assert ctx.alarm_at("recheck:1") == clock.now() + timedelta(minutes=1)
    assert ctx.cancel_alarm("recheck:1") is True


def test_a_rolled_back_transaction_is_closed_too(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = harness.build(engine, clock)
    with pytest.raises(RuntimeError), session_scope(engine) as db:
        db.get(Session, 1)
        raise RuntimeError("boom")
    assert not in_transaction(engine)
    ctx.schedule("queue_pass", clock.now(), "queue_pass")
