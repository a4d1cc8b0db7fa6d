"""Leader election on PostgreSQL: one scheduler per job store; a standby takes over."""

from __future__ import annotations

import threading

import pytest

from bot.leader import Leadership


def test_sqlite_elects_one_leader_through_a_lock_file(engine) -> None:
    elected = []
    first = Leadership(engine, lambda: elected.append("first"))
    second = Leadership(engine, lambda: elected.append("second"), retry_seconds=0.05)
    assert first.start() is True
    assert second.start() is False
    first.stop()
    second._thread.join(5)
    assert elected == ["first", "second"] and second.is_leader
    second.stop()


def test_only_one_process_leads_and_a_standby_takes_over(any_engine) -> None:
    if any_engine.dialect.name != "postgresql":
        pytest.skip("advisory locks are a PostgreSQL feature; SQLite is covered above")
    first_elected, second_elected = threading.Event(), threading.Event()
    first = Leadership(any_engine, first_elected.set)
    second = Leadership(any_engine, second_elected.set, retry_seconds=0.05)
    assert first.start() is True and first_elected.is_set()
    assert second.start() is False and not second_elected.is_set()
    first.stop()
    assert second_elected.wait(5), "the standby did not take over"
    assert second.is_leader
    second.stop()
