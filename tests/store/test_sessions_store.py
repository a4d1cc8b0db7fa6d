"""Sessions in the database, on SQLite and PostgreSQL: lineage, sparse class storage, trigger
reclassification (three clauses), precedence writes and the ranked queue."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from scheduler.errors import InvalidInput, NotFound
from scheduler.rules.genesis import SchedulingClass
from scheduler.store.models import Session, Status, Trigger
from scheduler.store.policy import change_policy, load_policy
from scheduler.store.ranking import (
    QueueFilter,
    change_class,
    change_trigger_class,
    ranked_queue,
    reorder_between,
    set_precedence,
)
from scheduler.store.sessions import NewSession, class_of, create_session
from tests.support.harness import T0

P, S = SchedulingClass.PRIORITY, SchedulingClass.SPOT


def count(db) -> int:
    return len(db.exec(select(Session)).all())


def make(db, n=0, **kw):
    return create_session(db, NewSession(**kw), now=T0 + timedelta(seconds=n))


def test_class_is_stored_only_when_chosen(any_db) -> None:
    s = make(any_db, genesis="command")
    assert s.scheduling_class is None
    assert class_of(s, load_policy(any_db)) is P
    change_policy(any_db, {"genesis_class_overrides": {"command": "spot"}}, surface="test", actor=None, now=T0)
    # Promoting/demoting a genesis moves existing deriving sessions: nothing was frozen in.
    assert class_of(any_db.get(Session, s.id), load_policy(any_db)) is S


def test_child_inherits_genesis_class_and_lands_above_parent(any_db) -> None:
    parent = make(any_db, genesis="schedule", scheduling_class="spot", precedence=40)
    child = make(any_db, 1, parent_id=parent.id)
    assert (child.genesis, child.scheduling_class, child.precedence) == ("schedule", "spot", 41)
    declared = make(any_db, 2, parent_id=parent.id, genesis="command")
    assert declared.genesis == "command"
    fork = make(any_db, 3, forked_from_id=parent.id)
    assert (fork.genesis, fork.precedence) == ("schedule", 41)
    summary = make(any_db, 4, forked_from_id=parent.id, bookkeeping=True)
    assert summary.precedence == 0


def test_missing_parent_is_not_found_and_writes_nothing(any_db) -> None:
    with pytest.raises(NotFound, match="session #999 does not exist"):
        make(any_db, parent_id=999)
    assert count(any_db) == 0


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (dict(genesis="carrier"), "genesis: 'carrier' is not a genesis kind"),
        (dict(scheduling_class="urgent"), "scheduling_class: 'urgent' is not a class"),
        (dict(precedence=3, place="top_of_spot"), "either precedence or place, not both"),
        (dict(weight=-1.0), "weight: must be a finite number >= 0"),
        (dict(capacity=0), "capacity: must be a whole number >= 1"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(any_db, kw, message) -> None:
    with pytest.raises(InvalidInput, match=message):
        make(any_db, **kw)
    assert count(any_db) == 0


def test_trigger_precedence_and_class_are_stamped(any_db) -> None:
    trig = Trigger(name="nightly", kind="schedule", scheduling_class="priority", precedence=70, created_at=T0)
    any_db.add(trig)
    any_db.flush()
    s = make(any_db, genesis="schedule", trigger_id=trig.id)
    assert (s.scheduling_class, s.class_from_trigger, s.precedence) == ("priority", True, 70)


def test_trigger_reclassification_three_clauses(any_db) -> None:
    trig = Trigger(name="labels", kind="github_label", scheduling_class="spot", created_at=T0)
    other = Trigger(name="other", kind="github_label", scheduling_class="spot", created_at=T0)
    any_db.add_all([trig, other])
    any_db.flush()
    waiting = make(any_db, 0, genesis="github_label", trigger_id=trig.id)
    started = make(any_db, 1, genesis="github_label", trigger_id=trig.id)
    started.status = Status.RUNNING
    by_hand = make(any_db, 2, genesis="github_label", trigger_id=trig.id)
    change_class(any_db, by_hand, "spot", now=T0)  # a person chose spot for this one
    foreign = make(any_db, 3, genesis="github_label", trigger_id=other.id)
    result = change_trigger_class(any_db, trig, "priority", now=T0)
    assert result.moved == 1 and result.promoted_ids == (waiting.id,)
    assert waiting.scheduling_class == "priority"
    assert started.scheduling_class == "spot"
    assert by_hand.scheduling_class == "spot"
    assert foreign.scheduling_class == "spot"
    # Back to Default: the stamp follows the trigger, resolving to spot again (moved back).
    back = change_trigger_class(any_db, trig, "default", now=T0)
    assert back.moved == 1 and waiting.scheduling_class is None
    # A rewrite that resolves to the class the sessions already had is not counted.
    same = change_trigger_class(any_db, trig, "spot", now=T0)
    assert same.rewritten == 1 and same.moved == 0


def test_top_of_spot_live_maximum_and_instance_form(any_db) -> None:
    a = make(any_db, 0, genesis="api", precedence=10)
    b = make(any_db, 1, genesis="api", precedence=3)
    archived = make(any_db, 2, genesis="api", precedence=500)
    archived.status = Status.ARCHIVED
    top = make(any_db, 3, genesis="api", place="top_of_spot")
    assert top.precedence == 15  # the archived 500 does not inflate the scale
    assert set_precedence(any_db, top, "top_of_spot", now=T0) == 15  # already first: a no-op
    assert set_precedence(any_db, b, "top_of_spot", now=T0) == 20
    assert a.precedence == 10


def test_reorder_between_nudges_adjacent_neighbours(any_db) -> None:
    hi = make(any_db, 0, genesis="api", precedence=21)
    lo = make(any_db, 1, genesis="api", precedence=20)
    row = make(any_db, 2, genesis="api", precedence=0)
    reorder_between(any_db, row, hi.id, lo.id, now=T0)
    assert (hi.precedence, row.precedence, lo.precedence) == (22, 20, 19)
    with pytest.raises(InvalidInput, match="beside itself"):
        reorder_between(any_db, row, row.id, lo.id, now=T0)


def test_ranked_queue_priority_above_spot_by_precedence_then_age(any_db) -> None:
    s_old = make(any_db, 0, genesis="api", precedence=5)
    s_new = make(any_db, 1, genesis="api", precedence=5)
    s_top = make(any_db, 2, genesis="api", precedence=50)
    pri = make(any_db, 3, genesis="command", precedence=-100)
    done = make(any_db, 4, genesis="api", precedence=99)
    done.status = Status.DONE
    any_db.flush()
    policy = load_policy(any_db)
    order = [s.id for s, _ in ranked_queue(any_db, policy)]
    assert order == [pri.id, s_top.id, s_old.id, s_new.id]
    spot_only = [s.id for s, cls in ranked_queue(any_db, policy, QueueFilter(scheduling_class="spot"))]
    assert spot_only == [s_top.id, s_old.id, s_new.id]
    assert [s.id for s, _ in ranked_queue(any_db, policy, QueueFilter(genesis="command"))] == [pri.id]
