"""Preemption cycling: the pure rule (`scheduler.rules.cycling.detect`) as one table, then the ledger
the scheduler keeps for it (`scheduler.store.preemption_ledger`) through real preemptions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from scheduler.rules.cycling import Event, detect
from scheduler.store.db import session_scope
from scheduler.store.models import PreemptionEvent
from scheduler.store.preemption_ledger import cycling_now
from tests.pauses.test_preemption import full_fleet
from tests.support.harness import T0

H = timedelta(hours=1)
NOW = T0 + 48 * H


def ev(victim: int, by: int | None, hours_ago: float, cost: float | None = None) -> Event:
    return Event(
        victim,
        by,
        NOW - hours_ago * H,
        halted=cost is not None,
        cost_lost_usd=cost or 0.0,
        title=f"s{victim}",
        by_title=f"s{by}",
    )


@pytest.mark.parametrize(
    ("rule", "events", "sessions", "pairs", "cost"),
    [
        ("nothing recorded, nothing cycles", [], [], [], 0.0),
        ("two preemptions in a day are not a cycle", [ev(1, 9, 1), ev(1, 8, 5)], [], [], 0.0),
        (
            "three in a day by three takers are",
            [ev(1, 9, 1), ev(1, 8, 5), ev(1, 7, 20, 0.5)],
            [(1, 3, 1, 0.5)],
            [],
            0.5,
        ),
        (
            "the day is the last 24 h: one 25 h ago does not count",
            [ev(1, 9, 1), ev(1, 8, 5), ev(1, 7, 25, 0.5)],
            [],
            [],
            0.0,
        ),
        ("one exactly 24 h ago is outside the window", [ev(1, 9, 1), ev(1, 8, 5), ev(1, 7, 24)], [], [], 0.0),
        ("one stamped after now is not counted yet", [ev(1, 9, 1), ev(1, 8, 5), ev(1, 7, -1)], [], [], 0.0),
        ("the same taker twice is a pair", [ev(1, 9, 1, 0.25), ev(1, 9, 3)], [], [(1, 9, 2, 0, False)], 0.25),
        (
            "each taking the other's slot is a mutual pair",
            [ev(1, 2, 1, 1.0), ev(2, 1, 2, 2.0)],
            [],
            [(1, 2, 1, 1, True)],
            3.0,
        ),
        ("a pair spread over two days is not", [ev(1, 2, 1), ev(2, 1, 30)], [], [], 0.0),
        (
            "no taker recorded: counted for the session, never a pair",
            [ev(1, None, 1), ev(1, None, 2), ev(1, None, 3)],
            [(1, 3, 0, 0.0)],
            [],
            0.0,
        ),
        (
            "a cycling session and its pair share their cost once",
            [ev(1, 9, 1, 1.0), ev(1, 9, 4, 1.0), ev(1, 8, 6, 1.0), ev(3, 4, 2, 5.0)],
            [(1, 3, 3, 3.0)],
            [(1, 9, 2, 0, False)],
            3.0,
        ),
    ],
)
def test_detect(rule, events, sessions, pairs, cost) -> None:
    found = detect(events, NOW)
    assert [(s.session_id, s.preemptions, s.halted, s.cost_lost_usd) for s in found.sessions] == sessions, rule
    assert [(p.first_id, p.second_id, p.first_yielded, p.second_yielded, p.mutual) for p in found.pairs] == pairs, rule
    assert found.cost_lost_usd == pytest.approx(cost), rule
    assert found.empty == (not sessions and not pairs), rule


def test_detect_counts_every_preemption_and_its_cost_in_the_window() -> None:
    found = detect([ev(1, 9, 1, 1.0), ev(2, 9, 2, 2.0), ev(3, 9, 30, 4.0)], NOW)
    assert (found.preemptions, found.window_cost_lost_usd, found.cost_lost_usd) == (2, 3.0, 0.0)
    assert found.since == NOW - 24 * H and found.until == NOW


def test_detect_orders_the_worst_first_and_names_the_takers_in_order() -> None:
    events = [ev(1, 9, 1), ev(1, 8, 2), ev(1, 9, 3)] + [ev(2, 7, h) for h in (1, 2, 3, 4)]
    found = detect(events, NOW)
    assert [s.session_id for s in found.sessions] == [2, 1]
    assert found.sessions[1].by == (9, 8) and found.sessions[1].title == "s1"
    assert found.sessions[1].last_at == NOW - 1 * H


def ledger(scene) -> list[PreemptionEvent]:
    with session_scope(scene.ctx.engine) as db:
        return list(db.exec(select(PreemptionEvent).order_by(PreemptionEvent.id)))


def test_a_mark_writes_one_event_naming_the_taker_and_the_turn(engine, clock) -> None:
    scene, (_a, b, _c) = full_fleet(engine, clock, 5, 0, 10)
    p = scene.start(cls="priority")
    [row] = ledger(scene)
    assert (row.session_id, row.by_id, row.at, row.halted) == (b, p, clock.now(), False)
    assert row.turn_id == scene.turns(b)[-1].id


def test_a_released_mark_leaves_no_event(engine, clock) -> None:
    scene, (_a, b, _c) = full_fleet(engine, clock, 5, 0, 10, lengths={0: 7})
    scene.start(cls="priority", minutes=3)
    scene.advance(minutes=5)
    assert scene.sweep().marks.released == [b]
    assert ledger(scene) == []


def test_a_halted_mark_costs_its_turn_and_three_in_a_day_are_reported(engine, clock) -> None:
    scene, (_a, b, _c) = full_fleet(engine, clock, 5, 0, 10, minutes=600)
    for _ in range(3):
        scene.start(cls="priority", minutes=12)
        scene.advance(minutes=11)
        assert scene.sweep().marks.halted == [b]
        scene.advance(minutes=2)  # the priority turn has ended: the sweep resumes b into its slot
        scene.sweep()
        assert b in scene.running_ids()
        scene.advance(minutes=30)  # past the cooldown, b may yield again
    assert [(r.session_id, r.halted) for r in ledger(scene)] == [(b, True)] * 3
    with session_scope(scene.ctx.engine) as db:
        found = cycling_now(db, clock.now())
    [s] = found.sessions
    assert (s.session_id, s.preemptions, s.halted) == (b, 3, 3)
    lost = sum(t.cost_usd for t in scene.turns(b) if t.status == "halted")
    assert lost > 0 and s.cost_lost_usd == pytest.approx(lost)
    assert found.pairs == ()  # three different priority sessions took the slot
