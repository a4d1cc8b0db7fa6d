"""The queue pass's shortcuts keep its answers (seed 001, "Consecutive holds back off"; a
requested pass): a refused alarm re-arms only itself, a candidate the gate refuses is not read whole, and
the reads kept across transactions see every write this process commits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import event, insert, text

from scheduler.engine import verdict as verdict_module
from scheduler.engine.queue_pass import recheck
from scheduler.engine.records import hold_job_id
from scheduler.engine.turns import submit_turn
from scheduler.holds.operator import REASON, place_hold
from scheduler.store import caches
from scheduler.store.db import make_engine, session_scope
from scheduler.store.models import OperatorHold
from scheduler.store.policy import change_policy, load_policy
from tests.support.harness import build, new, row

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def fill(ctx, n):
    return [submit_turn(ctx, new(ctx, genesis="command", prompt=f"busy {i}"), f"busy {i}").session_id for i in range(n)]


def held(ctx, n, **kw):
    ids = [new(ctx, genesis="schedule", prompt=f"spot {i}", **kw) for i in range(n)]
    for sid in ids:
        assert submit_turn(ctx, sid, f"spot {sid}").outcome == "held"
    return ids


def test_a_refused_alarm_advances_its_own_ladder_and_touches_no_other_hold(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=1, turn_minutes=600)
    fill(ctx, 1)
    first, second = held(ctx, 2)
    before = {sid: (row(ctx, sid).hold_count, row(ctx, sid).hold_retry_at) for sid in (first, second)}
    clock.set(before[second][1])
    recheck(ctx, second)
    after = row(ctx, second)
    assert after.hold_count == before[second][0] + 1 and after.hold_retry_at > before[second][1]
    assert deferrer.next_run(hold_job_id(second)) == after.hold_retry_at
    assert (row(ctx, first).hold_count, row(ctx, first).hold_retry_at) == before[first]  # not re-armed
    assert deferrer.next_run(hold_job_id(first)) == before[first][1]


def test_a_refused_alarm_writes_one_update_and_keeps_the_prompt_and_attachments(engine, clock, tmp_path) -> None:
    """The re-check reads the row as a detached copy and writes the next rung back as one
    UPDATE: the refused prompt and its attachments are carried, not rewritten or lost."""
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=1, turn_minutes=600)
    fill(ctx, 1)
    shot = tmp_path / "shot.png"
    shot.write_bytes(b"png")
    sid = new(ctx, genesis="schedule")
    attachments = [{"path": str(shot), "name": "shot.png"}]
    assert submit_turn(ctx, sid, "look at the screenshot", attachments, kind="follow_up").outcome == "held"
    before = row(ctx, sid)
    clock.set(before.hold_retry_at)
    statements: list[str] = []

    def record(_conn, _cursor, statement, *_args):
        statements.append(" ".join(statement.split()[:3]).upper())

    event.listen(engine, "before_cursor_execute", record)
    try:
        recheck(ctx, sid)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    after = row(ctx, sid)
    assert after.hold_count == before.hold_count + 1 and after.hold_retry_at > before.hold_retry_at
    assert (after.hold_prompt, after.hold_attachments, after.hold_turn_kind) == (
        "look at the screenshot",
        attachments,
        "follow_up",
    )
    assert (after.status, after.hold_reason) == ("waiting", "fleet_at_cap")
    assert after.updated_at == clock.now() and after.hold_at == clock.now()
    assert deferrer.next_run(hold_job_id(sid)) == after.hold_retry_at
    writes = [s for s in statements if s.startswith(("UPDATE", "INSERT", "DELETE"))]
    assert writes == ["UPDATE SESSIONS SET"], statements  # one write: the hold record


def test_a_refused_alarm_whose_hold_changed_reason_announces_it_once(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=1, turn_minutes=600)
    fill(ctx, 1)
    sid = held(ctx, 1)[0]
    heard: list[str] = []
    ctx.plugins.listeners.append(
        lambda event_name, context: heard.append(event_name) if context.get("session_id") == sid else None
    )
    with session_scope(engine) as db:  # an older record under another reason, as after a queue hold lifts
        db.execute(text("UPDATE sessions SET hold_reason = 'queue_hold' WHERE id = :sid"), {"sid": sid})
    clock.set(row(ctx, sid).hold_retry_at)
    recheck(ctx, sid)
    recheck(ctx, sid)
    assert row(ctx, sid).hold_reason == "fleet_at_cap"
    assert heard.count("held") == 1


class FlippingBurn:
    """A burn table the periodic refresh swaps between the pass's two asks about the due
    session: a burn the pace refuses on the first ask, a small one after."""

    def __init__(self) -> None:
        self.high = True

    def rate(self, runtime, model=None):
        return 1000.0 if self.high else 0.01


def test_an_alarm_refused_then_admitted_within_one_pass_starts_the_tracked_row(engine, clock, monkeypatch) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=2)
    burn = FlippingBurn()
    ctx.burn = burn
    sid = new(ctx, genesis="schedule")
    assert submit_turn(ctx, sid, "x").outcome == "held"
    clock.set(row(ctx, sid).hold_retry_at)
    checks = verdict_module.blocked

    def refresh_lands_here(*args):
        burn.high = False
        return checks(*args)

    monkeypatch.setattr(verdict_module, "blocked", refresh_lands_here)
    assert recheck(ctx, sid) == [sid]
    assert row(ctx, sid).status == "running" and row(ctx, sid).hold_reason is None
    assert deferrer.next_run(hold_job_id(sid)) is None  # a started turn needs no alarm


def test_an_alarm_the_gate_admits_starts_the_head_of_the_queue_first(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=1, turn_minutes=600)
    busy = fill(ctx, 1)[0]
    low = held(ctx, 1, precedence=1)[0]
    high = held(ctx, 1, precedence=50)[0]
    with session_scope(engine) as db:  # a slot frees without a kick (as if the kick were lost)
        change_policy(db, {"max_sessions": 2}, surface="test", actor=None, now=clock.now())
    recheck(ctx, low)  # the low one's alarm: the pass admits in rank order
    assert row(ctx, high).status == "running" and row(ctx, low).status == "waiting"
    assert row(ctx, busy).status == "running"
    assert deferrer.next_run(hold_job_id(low)) is not None  # its own hold still has an alarm


def test_a_hold_placed_after_a_pass_is_seen_by_the_next(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=3, wired=True)
    sid = new(ctx, genesis="schedule")
    with session_scope(engine) as db:
        assert caches.present(db, "operator_holds") is False
    place_hold(ctx, "all", armer="U1", reason="freeze")
    assert submit_turn(ctx, sid, "go").reason == REASON


def test_a_policy_change_is_read_by_the_next_transaction_and_its_own(engine, clock) -> None:
    build(engine, clock, max_sessions=3)
    with session_scope(engine) as db:
        assert load_policy(db).max_sessions == 3
    with session_scope(engine) as db:
        change_policy(db, {"max_sessions": 4}, surface="test", actor=None, now=clock.now())
        assert load_policy(db).max_sessions == 4  # its own write
    with session_scope(engine) as db:
        assert load_policy(db).max_sessions == 4  # the committed write, not the kept read


def test_a_write_this_process_did_not_make_is_seen_by_the_next_transaction(any_engine, clock) -> None:
    build(any_engine, clock, max_sessions=3)
    with session_scope(any_engine) as db:
        assert load_policy(db).max_sessions == 3
    with session_scope(any_engine) as db:
        assert load_policy(db).max_sessions == 3  # kept: nothing wrote the policy since
    with any_engine.begin() as conn:  # another process's raw write: no ORM event, no hook
        conn.execute(text("UPDATE policy SET max_sessions = 7"))
    with session_scope(any_engine) as db:
        assert load_policy(db).max_sessions == 7  # its store version moved: read again at once


def test_an_operator_hold_placed_by_another_process_holds_at_once(any_engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(any_engine, clock, max_sessions=3, wired=True)
    first = new(ctx)
    assert submit_turn(ctx, first, "x").outcome == "started"  # presence read and kept: no holds
    other = make_engine(any_engine.url.render_as_string(hide_password=False))
    with other.begin() as conn:  # a second process places a hold with its own engine: no hook here sees it
        conn.execute(
            insert(OperatorHold).values(
                selector_kind="all", selector_value="", armer="U_OPS", reason="freeze", created_at=clock.now()
            )
        )
    other.dispose()
    second = new(ctx)
    sub = submit_turn(ctx, second, "y")
    assert (sub.outcome, sub.reason) == ("held", REASON)


def test_a_rolled_back_write_does_not_invalidate_nor_leak(engine, clock) -> None:
    build(engine, clock, max_sessions=3)
    with pytest.raises(RuntimeError), session_scope(engine) as db:
        change_policy(db, {"max_sessions": 9}, surface="test", actor=None, now=clock.now())
        raise RuntimeError("rolled back")
    with session_scope(engine) as db:
        assert load_policy(db).max_sessions == 3


def test_an_asleep_candidate_is_not_examined(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=1, turn_minutes=30)
    fill(ctx, 1)
    sid = held(ctx, 1)[0]
    with session_scope(engine) as db:
        s = db.get(type(row(ctx, sid)), sid)
        s.wake_at = clock.now() + timedelta(hours=3)
        db.add(s)
    clock.advance(timedelta(minutes=31))
    ctx.run_job("queue_pass")
    assert row(ctx, sid).status == "waiting"


@pytest.mark.parametrize("savepoint", ["rolled back", "released"])
def test_a_savepoint_after_a_write_does_not_hide_the_write(engine, clock, savepoint) -> None:
    """A savepoint's end fires the ORM's commit/rollback events too (a failed preemption, a
    fail-open read on PostgreSQL): only the outer commit may publish what was written."""
    build(engine, clock, max_sessions=3)
    with session_scope(engine) as db:
        assert load_policy(db).max_sessions == 3
    with session_scope(engine) as db:
        change_policy(db, {"max_sessions": 5}, surface="test", actor=None, now=clock.now())
        if savepoint == "rolled back":
            with pytest.raises(RuntimeError), db.begin_nested():
                raise RuntimeError("a failed step inside the transaction")
        else:
            with db.begin_nested():
                pass
        assert load_policy(db).max_sessions == 5
    with session_scope(engine) as db:
        assert load_policy(db).max_sessions == 5


def test_a_write_not_yet_flushed_is_read_by_its_own_transaction(engine, clock) -> None:
    build(engine, clock, max_sessions=3)
    with session_scope(engine) as db:
        assert load_policy(db).max_sessions == 3
    with session_scope(engine) as db:
        from scheduler.store.policy import ensure_policy

        row = ensure_policy(db)
        row.max_sessions = 6  # no flush yet: the read must not come from the kept copy
        caches.forget(db, "policy")
        assert load_policy(db).max_sessions == 6


def test_an_operator_hold_over_held_sessions_is_restated_by_the_next_pass(engine, clock) -> None:
    """A session held for a full fleet, then covered by an operator hold: the next queue pass
    says the operator hold is why it waits (the holds view lists it under the hold)."""
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=1, turn_minutes=600, wired=True)
    fill(ctx, 1)
    first, second = held(ctx, 2)
    assert row(ctx, first).hold_reason == "fleet_at_cap"
    place_hold(ctx, "all", armer="U1", reason="freeze")
    ctx.run_job("queue_pass")
    assert row(ctx, first).hold_reason == REASON and row(ctx, second).hold_reason == REASON
