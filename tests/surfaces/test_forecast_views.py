"""The start-time forecast on the served app over a real SQLite file (issue 32, P20 item 2): the
leader's refresh keeps one row per waiting session, `why` words it as an estimate with its range,
the API's session view carries it as fields, and virtual time walked forward starts the session
inside the range it was given."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlmodel import select

from bot import jobs
from bot.chat import answers
from bot.runtime import process
from scheduler.engine.turns import submit_turn
from scheduler.front import SessionForecast, Turn, refresh_forecasts, session_scope
from tests.support.api_client import Api
from tests.support.harness import new

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.api(max_sessions=1, turn_minutes=30),
]


def console(api: Api, text: str) -> answers.Reply:
    return answers.answer(api.pacer, "alice", text, surface="console")


def scene(api: Api) -> dict[str, int]:
    """One slot, taken by a turn of 30 minutes that starts now; two spot waiters held for it."""
    ctx = api.ctx
    ids = {"running": new(ctx, title="running", prompt="long job", scheduling_class="spot")}
    assert submit_turn(ctx, ids["running"], "long job").outcome == "started"
    for name in ("first", "second"):
        ids[name] = new(ctx, title=name, prompt=f"{name} job", scheduling_class="spot")
        assert submit_turn(ctx, ids[name], f"{name} job").reason == "fleet_at_cap"
    return ids


def hm(at: datetime) -> str:
    return at.strftime("%H:%M")


def test_why_words_the_kept_forecast_with_its_range_and_the_api_carries_it_as_fields(api: Api) -> None:
    ids = scene(api)
    now = api.ctx.clock.now()
    assert "Expected to start" not in console(api, f"why {ids['first']}").text  # nothing forecast yet, nothing said
    assert refresh_forecasts(api.ctx) == 2
    # No turn has finished yet: a turn is expected to run the default 30 minutes, the slot frees at +30 and +60.
    first, second = now + timedelta(minutes=30), now + timedelta(minutes=60)
    text = console(api, f"why {ids['second']}").text
    assert (f"Expected to start around {hm(second)} UTC, between {hm(second)} and {hm(second)} — an estimate from "
            f"the queue as it stood at {hm(now)} UTC, not a promise.") in text
    assert "Queue #" in text  # the ladder stays beside it
    body = api.get(f"/sessions/{ids['first']}").json()
    assert datetime.fromisoformat(body["forecast"]["expected_start"]) == first
    assert datetime.fromisoformat(body["forecast"]["earliest"]) == first
    assert datetime.fromisoformat(body["forecast"]["latest"]) == first
    assert body["forecast"]["draws"] == 7 and "an estimate" in body["forecast"]["sentence"]
    assert api.get(f"/sessions/{ids['running']}").json()["forecast"] is None  # running: nothing to forecast
    assert "Expected to start" not in console(api, f"why {ids['running']}").text


def test_the_refresh_recomputes_only_on_a_change_of_the_queue(api: Api) -> None:
    ids = scene(api)
    assert refresh_forecasts(api.ctx) == 2
    assert refresh_forecasts(api.ctx) is None  # nothing changed: nothing recomputed
    assert console(api, f"stop {ids['second']}").ok
    assert refresh_forecasts(api.ctx) == 1  # a session left the queue: recomputed, its row gone
    with session_scope(api.ctx.ports.engine) as db:
        assert [f.session_id for f in db.exec(select(SessionForecast))] == [ids["first"]]


def test_walking_virtual_time_starts_each_waiter_inside_the_range_it_was_given(api: Api) -> None:
    ids = scene(api)
    refresh_forecasts(api.ctx)
    with session_scope(api.ctx.ports.engine) as db:
        given = {f.session_id: (f.low, f.high) for f in db.exec(select(SessionForecast))}
    api.deferrer.advance(timedelta(minutes=75))
    with session_scope(api.ctx.ports.engine) as db:
        started = {t.session_id: t.started_at for t in db.exec(select(Turn)) if t.session_id in given}
    for name in ("first", "second"):
        low, high = given[ids[name]]
        assert started[ids[name]] is not None and high is not None
        assert low <= started[ids[name]] <= high, (name, low, started[ids[name]], high)


def test_the_leaders_periodic_job_keeps_the_forecasts(api: Api) -> None:
    ids = scene(api)
    ctx = api.ctx
    ctx.jobs = {**ctx.jobs, **process.periodic_targets(api.pacer)}
    previous = jobs.install(ctx)
    try:
        jobs.run(process.FORECAST_REFRESH)  # what the leader runs every FORECAST_REFRESH_SECONDS
    finally:
        jobs.install(previous)
    with session_scope(ctx.ports.engine) as db:
        assert sorted(f.session_id for f in db.exec(select(SessionForecast))) == sorted([ids["first"], ids["second"]])
