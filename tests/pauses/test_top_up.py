"""The backlog top-up ceiling (seed 001, "Its sibling: the backlog top-up ceiling") over the real
turn engine in virtual time, on SQLite and PostgreSQL: while fewer sessions than the ceiling are
running a turn, the leader's top-up sweep fires `no_sessions_in_progress` to the ao_event
triggers subscribed to it, at most once per cooldown and only after the stretch; "Under its
ceiling since" is the moment the fleet crossed below, which sessions coming and going
underneath do not move; and the sweep's state stays out of the policy audit."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlmodel import col, select

from bot.api import intake
from bot.triggers import writes as store
from bot.triggers.spec import check_spec
from scheduler import wiring
from scheduler.context import Runtime
from scheduler.errors import InvalidInput
from scheduler.pauses.top_up_sweep import load_state, top_up_sweep
from scheduler.rules.top_up import TopUpPolicy, TopUpState, next_firing, step
from scheduler.store.db import session_scope
from scheduler.store.models import PolicyAudit, Session
from scheduler.store.policy import change_policy
from scheduler.store.sessions import NewSession
from tests.support.harness import T0, build

MINUTE = timedelta(minutes=1)


@pytest.fixture
def env(any_engine, clock):
    ctx, deferrer, workers, _quota = build(any_engine, clock, max_sessions=10, turn_minutes=60, wired=True)
    ctx.limits.runtimes = {**ctx.limits.runtimes, "codex": Runtime("codex", spends_quota=False)}
    return ctx, deferrer, workers


def set_top_up(ctx, **values) -> None:
    with session_scope(ctx.engine) as db:
        change_policy(db, values, surface="test", actor=None, now=ctx.clock.now())


def topping(ctx, template: str = "Top up: {{ fleet.running }} of {{ fleet.ceiling }} running. {{ text }}") -> int:
    spec = check_spec({"name": "top-up", "kind": "ao_event", "prompt_template": template,
                       "config": {"events": ["no_sessions_in_progress"]}, "scheduling_class": "priority"})
    with session_scope(ctx.engine) as db:
        return store.create_trigger(db, spec, now=ctx.clock.now()).trigger.id or 0


def start(ctx, title: str, **kw) -> int:
    return intake.api_session(
        ctx, NewSession(title=title, scheduling_class="priority", **kw), f"work on {title}"
    ).session_id


def spawned(ctx, trigger_id: int) -> list[Session]:
    with session_scope(ctx.engine) as db:
        return list(db.exec(select(Session).where(Session.trigger_id == trigger_id).order_by(col(Session.id))))


def under_since(ctx) -> datetime | None:
    with session_scope(ctx.engine) as db:
        return load_state(db).under_since


def test_seed_001_its_sibling_the_event_fires_once_under_the_ceiling_then_once_per_cooldown(env) -> None:
    """Seed 001, "Its sibling: the backlog top-up ceiling": the ceiling no_sessions_in_progress
    fires under, which hands an under-used fleet more to do; on a fleet that stays under, the
    cadence is the cooldown alone."""
    ctx, deferrer, _workers = env
    set_top_up(ctx, top_up_ceiling=3, top_up_cooldown_minutes=30)
    tid = topping(ctx)
    for i in range(3):
        start(ctx, f"busy {i}")
    deferrer.advance(MINUTE)
    report = top_up_sweep(ctx)
    assert (report.running, report.fired, under_since(ctx)) == (3, False, None)
    deferrer.advance(60 * MINUTE)  # the three finish at T0+60: the fleet is under its ceiling
    crossed = ctx.clock.now()
    report = top_up_sweep(ctx)
    assert report.running == 0 and report.fired and under_since(ctx) == crossed
    [first] = spawned(ctx, tid)
    assert (
        first.genesis == "ao_event"
        and first.status == "running"
        and first.source["fleet_event"] == "no_sessions_in_progress"
    )
    assert first.prompt.startswith(
        "Top up: 0 of 3 running. 0 of a top-up ceiling of 3 sessions running a turn, under it since"
    )
    for _ in range(29):  # not again before the cooldown, though the fleet stays under
        deferrer.advance(MINUTE)
        assert not top_up_sweep(ctx).fired
    deferrer.advance(MINUTE)
    again = top_up_sweep(ctx)
    assert again.fired and again.running == 1 and len(spawned(ctx, tid)) == 2
    assert under_since(ctx) == crossed
    assert next_firing(TopUpPolicy(3, 0, 30), again.state) == ctx.clock.now() + 30 * MINUTE


def test_under_its_ceiling_since_does_not_move_while_sessions_come_and_go_underneath(env) -> None:
    ctx, deferrer, workers = env
    set_top_up(ctx, top_up_ceiling=3, top_up_cooldown_minutes=600)
    top_up_sweep(ctx)
    crossed = under_since(ctx)
    assert crossed == ctx.clock.now()
    workers.duration = lambda _r: 5 * MINUTE
    for i in range(2):  # two start and finish, never reaching the ceiling
        start(ctx, f"short {i}")
        deferrer.advance(MINUTE)
        assert top_up_sweep(ctx).running == 1
        deferrer.advance(5 * MINUTE)
        assert top_up_sweep(ctx).running == 0
        assert under_since(ctx) == crossed
    workers.duration = lambda _r: 60 * MINUTE
    for i in range(3):  # reaching the ceiling clears it; going back under sets it anew
        start(ctx, f"long {i}")
    deferrer.advance(MINUTE)
    assert top_up_sweep(ctx).running == 3 and under_since(ctx) is None
    deferrer.advance(60 * MINUTE)
    top_up_sweep(ctx)
    assert under_since(ctx) == ctx.clock.now() != crossed


def test_the_stretch_holds_the_first_firing_and_every_runtime_counts(env) -> None:
    ctx, deferrer, _workers = env
    set_top_up(ctx, top_up_ceiling=2, top_up_stretch_minutes=10, top_up_cooldown_minutes=30)
    tid = topping(ctx)
    start(ctx, "codex work", runtime="codex")  # spends no quota: outside the concurrency limit, inside top-up
    start(ctx, "claude work")
    deferrer.advance(MINUTE)
    assert top_up_sweep(ctx).running == 2 and under_since(ctx) is None
    deferrer.advance(60 * MINUTE)
    crossed = ctx.clock.now()
    for _ in range(10):
        assert not top_up_sweep(ctx).fired
        deferrer.advance(MINUTE)
    assert top_up_sweep(ctx).fired and ctx.clock.now() == crossed + 10 * MINUTE
    assert len(spawned(ctx, tid)) == 1


def test_a_ceiling_of_zero_never_fires_and_the_sweeps_state_is_not_audited(env) -> None:
    ctx, deferrer, _workers = env
    set_top_up(ctx, top_up_ceiling=0)
    tid = topping(ctx)
    with session_scope(ctx.engine) as db:
        audited = len(db.exec(select(PolicyAudit)).all())
    for _ in range(3):
        assert not top_up_sweep(ctx).fired
        deferrer.advance(60 * MINUTE)
    assert spawned(ctx, tid) == [] and under_since(ctx) is None
    set_top_up(ctx, top_up_ceiling=1)
    assert top_up_sweep(ctx).fired
    with session_scope(ctx.engine) as db:
        assert len(db.exec(select(PolicyAudit)).all()) == audited + 1  # the ceiling's change, not the sweep's state


def test_the_sweep_runs_with_the_leaders_other_sweeps() -> None:
    assert wiring.PERIODIC["top_up_sweep"] == MINUTE
    assert "top_up_sweep" in wiring.targets()


@pytest.mark.parametrize(
    ("policy", "state", "running", "at", "after", "fires"),
    [
        # over or at the ceiling: not under; the last firing is kept for the cooldown
        (TopUpPolicy(3, 0, 30), TopUpState(T0, T0), 3, 5, TopUpState(None, T0), False),
        # crossing below: under since now, and no stretch to serve
        (TopUpPolicy(3, 0, 30), TopUpState(), 2, 0, TopUpState(T0, T0), True),
        # a stretch holds the first firing ...
        (TopUpPolicy(3, 10, 30), TopUpState(T0), 1, 9, TopUpState(T0), False),
        # ... until it has been served
        (TopUpPolicy(3, 10, 30), TopUpState(T0), 1, 10, TopUpState(T0, T0 + 10 * MINUTE), True),
        # inside the cooldown, even after a crossing back under
        (TopUpPolicy(3, 0, 30), TopUpState(None, T0), 0, 29, TopUpState(T0 + 29 * MINUTE, T0), False),
        (TopUpPolicy(3, 0, 30), TopUpState(T0, T0), 0, 30, TopUpState(T0, T0 + 30 * MINUTE), True),
        # a ceiling of 0: nothing is below it
        (TopUpPolicy(0, 0, 30), TopUpState(), 0, 0, TopUpState(), False),
    ],
)
def test_step_is_one_rule_per_row(policy, state, running, at, after, fires) -> None:
    assert step(policy, state, running, T0 + at * MINUTE) == (after, fires)


def test_a_trigger_on_fleet_events_watches_no_session_and_names_what_is_allowed() -> None:
    base = {"name": "t", "kind": "ao_event", "prompt_template": "{{ fleet.running }} running"}
    for config, field, says in (
        (
            {"events": ["no_sessions_in_progress"], "states": ["done"]},
            "config.states",
            "give events without session_id, filter, states or summary",
        ),
        ({"events": []}, "config.events", "a non-empty list of no_sessions_in_progress"),
        ({"events": ["fleet_full"]}, "config.events", "'fleet_full' is not a fleet event; use no_sessions_in_progress"),
        ({}, "config.session_id", "or subscribes to fleet events (events) alone"),
    ):
        with pytest.raises(InvalidInput) as refused:
            check_spec({**base, "config": config})
        assert refused.value.field == field and says in str(refused.value)
    with pytest.raises(InvalidInput) as refused:  # a fleet event has no session to read
        check_spec(
            {**base, "prompt_template": "{{ session.title }}", "config": {"events": ["no_sessions_in_progress"]}}
        )
    assert refused.value.field == "prompt_template"
    assert check_spec({**base, "config": {"events": ["no_sessions_in_progress"] * 2}}).config == {
        "events": ["no_sessions_in_progress"]
    }


def test_the_gate_card_shows_the_thresholds_the_count_and_under_its_ceiling_since(env) -> None:
    from scheduler.steering.gate_card import build_card, render_card

    ctx, deferrer, _workers = env
    set_top_up(ctx, top_up_ceiling=3, top_up_stretch_minutes=5, top_up_cooldown_minutes=30)
    start(ctx, "one")
    for i in range(3):
        start(ctx, f"busy {i}")
    deferrer.advance(MINUTE)
    top_up_sweep(ctx)

    def card() -> tuple[dict, str]:
        with session_scope(ctx.engine) as db:
            built = build_card(db, ctx, None, ctx.clock.now())
        return built.as_dict()["top_up"], render_card(built)

    data, text = card()
    assert data == {
        "ceiling": 3,
        "stretch_minutes": 5,
        "cooldown_minutes": 30,
        "running": 4,
        "under": False,
        "ceiling_above_workers": False,
        "under_since": None,
        "last_fired_at": None,
        "next_firing_at": None,
    }
    assert (
        "Backlog top-up: 4 running a turn against a ceiling of 3 (every runtime) · stretch 5 min · cooldown 30 min\n"
        in text
    )
    assert "  At or over its ceiling: no top-up\n" in text
    deferrer.advance(60 * MINUTE)
    crossed = ctx.clock.now()
    top_up_sweep(ctx)
    data, text = card()
    assert data["running"] == 0 and data["under"] and data["under_since"] == crossed.isoformat()
    assert data["next_firing_at"] == (crossed + 5 * MINUTE).isoformat() and data["last_fired_at"] is None
    assert "  Under its ceiling since 2026-11-02 10:01 UTC · next top-up no sooner than 2026-11-02 10:06 UTC\n" in text
    ctx.limits.agent_workers = 2
    data, text = card()
    assert (
        data["ceiling_above_workers"]
        and "the ceiling is above the 2 workers, so top-up sees room even while every worker is busy" in text
    )
    set_top_up(ctx, top_up_ceiling=0)
    assert "Backlog top-up: off (ceiling 0) · 0 running a turn" in card()[1]


def test_pacer_policy_on_slack_and_the_console_shows_the_thresholds_and_under_since(any_engine, clock) -> None:
    from bot.chat import answers
    from tests.support.api_client import make_api

    api = make_api(any_engine, clock, max_sessions=4)
    try:
        answers.answer(api.pacer, "alice", "policy set top_up=2 top_up_stretch=5 top_up_cooldown=20", surface="slack")
        top_up_sweep(api.ctx)
        slack = answers.answer(api.pacer, "bob", "policy", surface="slack").text
        assert "• top_up: *2* (stretch *5* min, cooldown *20* min)\n" in slack
        assert (
            "Backlog top-up: 0 running a turn against a ceiling of *2* (every runtime) · stretch 5 min · cooldown 20 "
            "min"
            " · under its ceiling since 2026-11-02 09:00 UTC · next top-up no sooner than 2026-11-02 09:05 UTC"
        ) in slack
        console = answers.answer(api.pacer, "bob", "policy", surface="console").text
        assert "  top_up: 2 (stretch 5 min, cooldown 20 min)\n" in console
        assert (
            "  Under its ceiling since 2026-11-02 09:00 UTC · next top-up no sooner than 2026-11-02 09:05 UTC\n"
            in console
        )
        assert api.get("/policy").json()["gate"]["top_up"]["under_since"] == T0.isoformat()
    finally:
        api.close()
