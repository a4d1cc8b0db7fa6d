"""Session events (`ao_event` triggers) in virtual time over the real turn engine: a trigger fires
when a watched session, or any session matching its filter, changes to a state it names; the new
session carries the watched session's facts; and no chain of triggers can loop."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import col, select

from bot.api import intake
from bot.triggers import writes as store
from bot.triggers.spec import check_spec
from scheduler.engine.lifecycle import archive
from scheduler.ports import Outcome
from scheduler.steering.firing import TriggerEvent, fire
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Trigger
from scheduler.store.sessions import NewSession
from tests.support.harness import build, row

TEMPLATE = "Session #{{ session.id }} ({{ session.title }}) is {{ new_status }}; it said: {{ session.output }}"


@pytest.fixture
def env(engine, clock):
    ctx, deferrer, workers, _quota = build(engine, clock, max_sessions=4, turn_minutes=10, wired=True)
    return ctx, deferrer, workers


def trigger(ctx, name: str, config: dict, template: str = TEMPLATE, **extra) -> int:
    spec = check_spec({"name": name, "kind": "ao_event", "prompt_template": template, "config": config, **extra})
    with session_scope(ctx.engine) as db:
        return store.create_trigger(db, spec, now=ctx.clock.now()).trigger.id or 0


def start(ctx, title: str = "watched", **kw) -> int:
    fired = intake.api_session(ctx, NewSession(title=title, **kw), f"work on {title}")
    return fired.session_id


def spawned(ctx, trigger_id: int | None = None) -> list[Session]:
    with session_scope(ctx.engine) as db:
        stmt = select(Session).where(Session.genesis == "ao_event").order_by(col(Session.id))
        if trigger_id is not None:
            stmt = stmt.where(Session.trigger_id == trigger_id)
        return list(db.exec(stmt))


def test_a_watched_session_finishing_fires_its_trigger_with_the_sessions_facts(env) -> None:
    ctx, deferrer, _workers = env
    watched = start(ctx, "refactor parser")
    tid = trigger(ctx, "after-parser", {"session_id": watched, "states": ["done"]}, precedence=15)
    deferrer.advance(timedelta(minutes=11))
    assert row(ctx, watched).status == "done"
    made = spawned(ctx, tid)
    assert len(made) == 1
    s = made[0]
    assert s.genesis == "ao_event" and s.scheduling_class is None and s.precedence == 15
    assert s.prompt == f"Session #{watched} (refactor parser) is done; it said: simulated 10.0 min"
    assert (
        s.source["watched_session_id"] == watched
        and s.source["watched_status"] == "done"
        and s.source["ao_chain"] == [tid]
    )
    assert s.status == "running"  # spot, and there is room: it started through submit_turn


def test_only_the_configured_states_fire_and_running_is_a_state(env) -> None:
    ctx, deferrer, _workers = env
    on_start = trigger(
        ctx, "on-start", {"filter": {"genesis": "api"}, "states": ["running"]}, template="{{ session.title }} started"
    )
    on_fail = trigger(ctx, "on-fail", {"filter": {"genesis": "api"}, "states": ["failed"]})
    sid = start(ctx, "one")
    deferrer.advance(timedelta(0))
    assert [s.prompt for s in spawned(ctx, on_start)] == ["one started"]
    deferrer.advance(timedelta(minutes=11))
    assert spawned(ctx, on_fail) == [] and row(ctx, sid).status == "done"


def test_a_filter_on_the_watched_sessions_trigger_fires_when_its_sessions_fail(env, engine, clock) -> None:
    ctx, deferrer, workers = env
    workers.outcome = lambda request: Outcome.FAILED
    intake_spec = check_spec(
        {"name": "issue-intake", "kind": "github_label", "prompt_template": "{{ title }}", "config": {}}
    )
    with session_scope(engine) as db:
        source_trigger = store.create_trigger(db, intake_spec, now=clock.now()).trigger.id
    tid = trigger(ctx, "triage", {"filter": {"trigger": "issue-intake"}, "states": ["failed", "blocked"]})
    failing = fire(ctx, source_trigger, TriggerEvent("github_label", {"title": "broken build"})).session_id
    other = start(ctx, "unrelated")
    deferrer.advance(timedelta(minutes=11))
    assert row(ctx, failing).status == "failed" and row(ctx, other).status == "failed"
    made = spawned(ctx, tid)
    assert [s.source["watched_session_id"] for s in made] == [failing]


def test_archiving_is_a_state_change_too(env) -> None:
    ctx, deferrer, _workers = env
    sid = start(ctx, "to archive")
    tid = trigger(
        ctx, "on-archive", {"session_id": sid, "states": ["archived"]}, template="clean up after #{{ session.id }}"
    )
    archive(ctx, sid)
    deferrer.advance(timedelta(0))
    assert [s.prompt for s in spawned(ctx, tid)] == [f"clean up after #{sid}"]


def test_a_trigger_never_fires_on_a_session_it_spawned_and_chains_end(env) -> None:
    ctx, deferrer, _workers = env
    watched = start(ctx, "root")
    first = trigger(ctx, "first", {"session_id": watched, "states": ["done"]})
    # Both react to any ao_event session finishing — each other's spawns, and their own.
    second = trigger(ctx, "second", {"filter": {"genesis": "ao_event"}, "states": ["done"]})
    third = trigger(ctx, "third", {"filter": {"genesis": "ao_event"}, "states": ["done"]})
    deferrer.advance(timedelta(hours=6))
    made = spawned(ctx)
    chains = sorted(tuple(s.source["ao_chain"]) for s in made)
    assert chains == sorted([(first,), (first, second), (first, third), (first, second, third), (first, third, second)])
    assert all(s.status == "done" for s in made)
    for s in made:
        assert s.trigger_id is not None and s.source["ao_chain"].count(s.trigger_id) == 1
    assert not [j for j in deferrer.pending() if j.startswith("session_event")]


def test_a_disabled_trigger_and_a_quiet_deployment_arm_nothing(env) -> None:
    ctx, deferrer, _workers = env
    sid = start(ctx, "quiet")
    assert not [j for j in deferrer.pending() if j.startswith("session_event")]
    tid = trigger(ctx, "off", {"session_id": sid, "states": ["done"]}, enabled=False)
    deferrer.advance(timedelta(minutes=11))
    assert spawned(ctx, tid) == []


def test_a_trigger_whose_template_cannot_render_is_skipped_and_the_others_still_fire(env, engine, clock) -> None:
    ctx, deferrer, _workers = env
    sid = start(ctx, "w")
    good = trigger(ctx, "good", {"session_id": sid, "states": ["done"]})
    bad = trigger(ctx, "bad", {"session_id": sid, "states": ["done"]})
    with session_scope(engine) as db:  # a template edited outside validation, say by hand in the database
        row_ = db.get(Trigger, bad)
        row_.prompt_template = "{{ session.missing_field }}"
        db.add(row_)
    deferrer.advance(timedelta(minutes=11))
    assert len(spawned(ctx, good)) == 1 and spawned(ctx, bad) == []


def test_a_held_watched_session_is_waiting(env) -> None:
    ctx, deferrer, _workers = env
    tid = trigger(ctx, "on-wait", {"filter": {"genesis": "api", "scheduling_class": "spot"}, "states": ["waiting"]},
                  template="{{ session.title }} waits")
    for i in range(5):  # four slots: the fifth is held
        start(ctx, f"s{i}")
    deferrer.advance(timedelta(0))
    assert [s.prompt for s in spawned(ctx, tid)] == ["s4 waits"]


def bookkeeping(ctx) -> list[Session]:
    with session_scope(ctx.engine) as db:
        return list(db.exec(select(Session).where(col(Session.bookkeeping).is_(True)).order_by(col(Session.id))))


def test_a_summary_trigger_asks_for_a_status_summary_of_the_session_that_changed(env) -> None:
    """Pacer's own bookkeeping, asked by a trigger: a bookkeeping fork of the watched session, spot
    at precedence 0, and no session of the trigger's own; the fork's own end fires nothing."""
    ctx, deferrer, _workers = env
    watched = start(ctx, "refactor parser")
    tid = trigger(ctx, "digest", {"session_id": watched, "states": ["done"], "summary": True}, precedence=15)
    everyone = trigger(ctx, "on-any-done", {"filter": {"scheduling_class": "spot"}, "states": ["done"]})
    deferrer.advance(timedelta(minutes=11))
    assert row(ctx, watched).status == "done"
    assert spawned(ctx, tid) == []
    [fork] = bookkeeping(ctx)
    assert (fork.forked_from_id, fork.scheduling_class, fork.precedence) == (watched, "spot", 0)
    assert fork.requester == "trigger:digest" and fork.status == "running"
    deferrer.advance(timedelta(minutes=11))
    assert row(ctx, fork.id).status == "done"
    assert [s.source["watched_session_id"] for s in spawned(ctx, everyone)] == [watched]  # not the fork's end
    assert len(bookkeeping(ctx)) == 1  # a summary's end asks for no summary of it


def test_a_summary_trigger_under_an_operator_hold_is_refused_not_queued(env) -> None:
    from scheduler.holds.operator import NewOperatorHold, add_hold

    ctx, deferrer, _workers = env
    watched = start(ctx, "refactor parser", scheduling_class="priority")
    trigger(ctx, "digest", {"session_id": watched, "states": ["done"], "summary": True})
    with session_scope(ctx.engine) as db:
        add_hold(db, NewOperatorHold("all", [], "UOPS", "freeze"), ctx.clock.now())
    deferrer.advance(timedelta(minutes=11))
    assert row(ctx, watched).status == "done"
    assert bookkeeping(ctx) == []  # refused before the fork: nothing made, nothing held
    with session_scope(ctx.engine) as db:
        assert db.exec(select(Session).where(col(Session.status) == "waiting")).all() == []


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"session_id": 1, "states": ["done"], "summary": "yes"}, "config.summary: true (ask for a status summary"),
        ({"events": ["no_sessions_in_progress"], "summary": True}, "give events without session_id, filter, states or"),
    ],
)
def test_a_bad_summary_setting_is_refused_naming_it(config, message) -> None:
    from scheduler.errors import InvalidInput

    with pytest.raises(InvalidInput) as refused:
        check_spec({"name": "digest", "kind": "ao_event", "prompt_template": TEMPLATE, "config": config})
    assert message in str(refused.value)
