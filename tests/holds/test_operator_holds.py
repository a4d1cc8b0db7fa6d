"""Operator holds (seed 000, "Held agents"): selectors, "held by <armer>", TTL expiry, prune,
release and who may release, fail-open, and the hold deadlock."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlmodel import SQLModel, func, select

from scheduler.engine.start_now import start_now
from scheduler.engine.turns import submit_turn
from scheduler.errors import Forbidden, InvalidInput, NotFound, Refused
from scheduler.holds.operator import (
    SELECTOR_KINDS,
    admission_check,
    applies,
    place_hold,
    release_hold,
)
from scheduler.holds.view import list_holds, show_hold
from scheduler.store import db as dbmod
from scheduler.store.db import session_scope
from scheduler.store.models import OperatorHold, Session, Trigger
from scheduler.store.policy import ensure_policy, load_policy
from scheduler.store.prerequisite_rows import record_prerequisites
from scheduler.wiring import run_periodic
from tests.support.harness import build, new, row
from tests.support.holdkit import Heard, holds, holds_text

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def add_trigger(ctx, name="nightly") -> int:
    with session_scope(ctx.engine) as db:
        trigger = Trigger(name=name, kind="schedule", created_at=ctx.clock.now())
        db.add(trigger)
        db.flush()
        return trigger.id or 0


@pytest.mark.parametrize(
    ("kind", "values", "held"),
    [
        ("session", ["#1", "3"], {1, 3}),
        ("genesis", ["github_issue"], {2}),
        ("trigger", ["nightly"], {3}),
        ("repository", ["Acme/API"], {1, 2}),
        ("label", ["Needs-Review"], {2}),
        ("class", ["priority"], {4}),
        ("all", [], {1, 2, 3, 4}),
    ],
)
def test_a_selector_holds_exactly_the_sessions_it_names(engine, clock, kind, values, held) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=10, wired=True)
    trigger = add_trigger(ctx)
    ids = [
        new(ctx, source={"repository": "acme/api"}),
        new(
            ctx, genesis="github_issue", source={"repository": "acme/api", "labels": [{"name": "needs-review"}, "bug"]}
        ),
        new(ctx, trigger_id=trigger),
        new(ctx, genesis="command"),
    ]
    hold = place_hold(ctx, kind, values, armer="U_ANN", reason="deploy freeze")
    outcomes = {sid: submit_turn(ctx, sid, "go") for sid in ids}
    assert {sid for sid, sub in outcomes.items() if sub.outcome == "held"} == held
    for sid in held:
        s = row(ctx, sid)
        assert s.status == "waiting" and s.hold_reason == "operator_hold"
        assert s.hold_sentence == f"held by U_ANN (deploy freeze) — hold {hold.id}, until released."
    assert set(show_hold_now(ctx, hold.id).held) == held


def show_hold_now(ctx, hold_id):
    with session_scope(ctx.engine) as db:
        return show_hold(db, hold_id, ctx.clock.now())


@pytest.mark.parametrize(
    ("kind", "values", "error", "message"),
    [
        ("team", ["x"], InvalidInput, "selector: 'team' is not a selector; use one of session, genesis"),
        ("session", [], InvalidInput, "session needs at least one session id"),
        ("session", ["twelve"], InvalidInput, "'twelve' is not a session id"),
        ("session", ["#99"], NotFound, "session #99 does not exist"),
        ("genesis", ["email"], InvalidInput, "genesis 'email' is not a genesis"),
        ("class", ["urgent"], InvalidInput, "class 'urgent' is not a class; use priority or spot"),
        ("repository", ["not a repo"], InvalidInput, "selector: 'not a repo' is not a repository; use owner/name"),
        ("trigger", ["nope"], NotFound, "trigger nope does not exist"),
        ("all", ["x"], InvalidInput, "all takes no value"),
        ("label", ["a", "b"], InvalidInput, "label takes exactly one value"),
    ],
)
def test_a_bad_selector_is_refused_and_writes_nothing(engine, clock, kind, values, error, message) -> None:
    ctx, *_ = build(engine, clock, wired=True)
    with pytest.raises(error, match=message):
        place_hold(ctx, kind, values, armer="U_ANN")
    with session_scope(engine) as db:
        assert db.exec(select(func.count()).select_from(OperatorHold)).one() == 0


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"armer": " "}, "armer: say who places the hold"),
        ({"armer": "U", "ttl": timedelta(0)}, "ttl: give a duration above zero and at most 30 days"),
        ({"armer": "U", "ttl": timedelta(days=31)}, "ttl: give a duration above zero"),
        ({"armer": "U", "reason": "x" * 501}, "reason: at most 500 characters"),
    ],
)
def test_bad_hold_arguments_are_refused(engine, clock, kw, message) -> None:
    ctx, *_ = build(engine, clock, wired=True)
    with pytest.raises(InvalidInput, match=message):
        place_hold(ctx, "all", **kw)


def test_a_hold_keeps_sessions_waiting_even_with_capacity_free_and_start_now_too(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=10, wired=True)
    sid = new(ctx, genesis="command")  # priority: the gate would start it at once
    place_hold(ctx, "session", [str(sid)], armer="U_ANN")
    assert submit_turn(ctx, sid, "go").outcome == "held"
    result = start_now(ctx, sid)
    assert result.sentence.startswith(f"#{sid} was not started and stays queued: held by U_ANN")
    assert f"  #{sid} (untitled)\n      held: an operator's hold" in holds_text(ctx)


def test_a_ttl_ends_the_hold_by_itself_and_the_queue_moves(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, wired=True)
    sid = new(ctx)
    hold = place_hold(ctx, "all", armer="U_ANN", ttl=timedelta(minutes=30))
    sub = submit_turn(ctx, sid, "go")
    assert sub.outcome == "held" and sub.retry_at == clock.now() + timedelta(minutes=30)
    assert "expires 2026-11-02 09:30 UTC" in row(ctx, sid).hold_sentence
    deferrer.advance(timedelta(minutes=30))
    assert row(ctx, sid).status == "running"
    with session_scope(engine) as db:
        ended = db.get(OperatorHold, hold.id)
        assert ended.released_by == "its TTL passed" and ended.released_at == ended.expires_at
        assert list_holds(db, clock.now()) == []


def test_the_prune_ends_holds_whose_ttl_passed_or_whose_armer_ended(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, turn_minutes=10, wired=True)
    armer = new(ctx, genesis="command")
    submit_turn(ctx, armer, "I hold things")
    by_session = place_hold(ctx, "genesis", ["schedule"], armer=f"session:{armer}")
    timed = place_hold(ctx, "genesis", ["github_label"], armer="U_ANN", ttl=timedelta(minutes=5))
    kept = place_hold(ctx, "genesis", ["ao_event"], armer="U_ANN")
    deferrer.cancel(f"operator_hold:{timed.id}")  # its alarm was lost with a worker
    deferrer.advance(timedelta(minutes=11))  # the armer session is done, the TTL passed
    with session_scope(engine) as db:
        assert [h.id for h in list_holds(db, clock.now())] == [kept.id]  # admission already ignores both
    assert sorted(run_periodic(ctx, "operator_hold_sweep")["pruned"]) == sorted([by_session.id, timed.id])
    with session_scope(engine) as db:
        assert db.get(OperatorHold, by_session.id).released_by == "its armer ended"
        assert db.get(OperatorHold, timed.id).released_by == "its TTL passed"
    assert run_periodic(ctx, "operator_hold_sweep")["pruned"] == []


def test_releasing_another_persons_hold_needs_the_operator_role(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, wired=True)
    sid = new(ctx)
    hold = place_hold(ctx, "all", armer="U_ANN")
    submit_turn(ctx, sid, "go")
    with pytest.raises(
        Forbidden,
        match=f"^hold {hold.id} was placed by U_ANN; releasing another person's hold needs the operator role$",
    ):
        release_hold(ctx, hold.id, actor="U_BOB", actor_role="member")
    assert row(ctx, sid).status == "waiting"
    release_hold(ctx, hold.id, actor="U_OPS", actor_role="operator")
    deferrer.advance(timedelta(0))  # the release asks for a queue pass
    assert row(ctx, sid).status == "running"
    with pytest.raises(Refused, match=f"hold {hold.id} was already released by U_OPS"):
        release_hold(ctx, hold.id, actor="U_ANN")
    with pytest.raises(NotFound, match="hold 404 does not exist"):
        release_hold(ctx, 404, actor="U_ANN")


def test_the_armer_releases_their_own_hold(engine, clock) -> None:
    ctx, *_ = build(engine, clock, wired=True)
    hold = place_hold(ctx, "all", armer="U_ANN")
    assert release_hold(ctx, hold.id, actor="U_ANN").released_by == "U_ANN"


def test_a_hold_store_that_cannot_be_read_fails_open_with_a_log_line(engine, clock, caplog) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, wired=True)
    place_hold(ctx, "all", armer="U_ANN")
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE operator_holds"))
    with caplog.at_level(logging.WARNING, logger="pacer.store"):
        sub = submit_turn(ctx, new(ctx), "go")
    assert sub.outcome == "started"
    assert "the operator hold store could not be read (OperationalError); admission ignores it this time" in caplog.text


def test_a_session_armer_waiting_on_the_session_its_hold_holds_is_a_deadlock_raised_once(engine, clock) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, wired=True)
    heard = Heard(ctx)
    held, armer = new(ctx, title="Deploy"), new(ctx, title="Release notes")
    with session_scope(engine) as db:
        record_prerequisites(db, db.get(Session, armer), f"depends on #{held}")
    hold = place_hold(ctx, "session", [str(held)], armer=f"session:{armer}")
    submit_turn(ctx, held, "deploy")
    submit_turn(ctx, armer, "write notes")
    (notice,) = heard.of("hold_deadlock")
    assert notice["sentence"] == (
        f"Hold deadlock: #{held} “Deploy” is held by hold {hold.id}, armed by session:{armer}, and #{armer}, "
        f"the armer, waits on #{held}. The hold's TTL still moves the pair eventually; release hold {hold.id} "
        "or archive one side to resolve it sooner."
    )
    run_periodic(ctx, "operator_hold_sweep")
    assert len(heard.of("hold_deadlock")) == 1


def test_a_persons_own_session_waiting_on_what_they_hold_is_a_deadlock(engine, clock) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, wired=True)
    heard = Heard(ctx)
    target = new(ctx, source={"repository": "acme/api", "issue": 12}, title="Fix the API")
    mine = new(ctx, requester="U_ANN", source={"repository": "acme/api", "issue": 13})
    with session_scope(engine) as db:
        record_prerequisites(db, db.get(Session, mine), "depends on #12")
    submit_turn(ctx, target, "fix")
    assert heard.of("hold_deadlock") == []
    place_hold(ctx, "repository", ["acme/api"], armer="U_ANN")
    assert heard.of("hold_deadlock") == []  # #12 is running, not waiting on the hold
    deferrer.advance(timedelta(minutes=20))  # its turn ends …
    submit_turn(ctx, target, "again", kind="follow_up")  # … and its next turn is held
    run_periodic(ctx, "operator_hold_sweep")
    (notice,) = heard.of("hold_deadlock")
    assert notice["held_session_id"] == target and notice["waiting_session_id"] == mine
    assert f"#{mine}, a session of U_ANN, waits on #{target}" in notice["sentence"]


def test_holds_lists_live_operator_holds_with_their_selector_armer_and_expiry(engine, clock) -> None:
    ctx, *_ = build(engine, clock, wired=True)
    place_hold(ctx, "label", ["needs-review"], armer="U_ANN", reason="waiting for the audit", ttl=timedelta(hours=2))
    (view,) = holds(ctx).operator_holds
    assert (view.selector_kind, view.selector_value, view.armer, view.expires_at) == (
        "label",
        "needs-review",
        "U_ANN",
        clock.now() + timedelta(hours=2),
    )
    assert (
        "  hold 1 · label needs-review · by U_ANN since 2026-11-02 09:00 UTC · expires 2026-11-02 11:00 UTC · waiting "
        "for the audit"
        in holds_text(ctx)
    )


# --------------------------------------------------------------------------- the property

_NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
_engine = None


def _shared_engine():
    global _engine
    if _engine is None:
        _engine = dbmod.make_engine("sqlite://")
        SQLModel.metadata.create_all(_engine)
        with session_scope(_engine) as db:
            ensure_policy(db)
    return _engine


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(SELECTOR_KINDS),
    ago=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=40)),
    released=st.booleans(),
    genesis=st.sampled_from(["api", "command", "github_issue", "schedule"]),
    label=st.sampled_from(["bug", "needs-review"]),
)
def test_an_expired_operator_hold_never_holds_anything(kind, ago, released, genesis, label) -> None:
    engine = _shared_engine()
    value = {"session": "1", "genesis": genesis, "trigger": "1", "repository": "acme/api", "label": label,
             "class": "priority" if genesis == "command" else "spot", "all": ""}[kind]
    with dbmod.session_scope(engine) as db:
        hold = OperatorHold(
            selector_kind=kind, selector_value=value, armer="U", created_at=_NOW - timedelta(days=41),
            expires_at=_NOW - ago, released_at=_NOW - ago if released else None,
        )
        session = Session(
            id=1, genesis=genesis, trigger_id=1, source={"repository": "acme/api", "labels": [label]}, created_at=_NOW
        )
        db.add(hold)
        db.flush()
        live = OperatorHold(selector_kind=kind, selector_value=value, armer="U", created_at=_NOW)
        assert applies(live, session, _NOW, load_policy(db))  # the same hold, in force, would hold it
        assert not applies(hold, session, _NOW, load_policy(db))
        assert admission_check(object())(db, session, _NOW) is None  # type: ignore[arg-type]
        db.rollback()
