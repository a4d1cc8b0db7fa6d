"""The early notice: when a window's spot budget runs out within PACER_NOTICE_MINUTES at the
present burn, each running spot session is told once per window instance, in its Slack thread (or
by DM to whoever asked for it with /pacer) and on its issue's status comment."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slack_sdk import WebClient
from sqlalchemy import Engine

from bot.github.events import IntakeEvent, parse
from bot.github.intake import github_event
from integrations.github.client import GithubClients
from integrations.github.comments import PyGithubComments, StatusComments
from integrations.slack.notifier import SESSION_PRIORITY, SlackNotifier, thread_source
from scheduler.pauses.budget_notice import EVENT, RunOut, running_out
from scheduler.rules.gate import WindowFigures
from scheduler.store.db import session_scope
from scheduler.store.models import Trigger
from templates import render
from tests.support.github_support import FakeGithub, issue_payload
from tests.support.slack_mock import BOT_TOKEN, MockSlack
from tests.support.sweeping import Scene

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def window(name: str = "5h", *, left: float = 20.0, burn: float | None = 1.0, minutes_left: float = 240.0,
           calibrated: bool = True) -> WindowFigures:
    capacity = 1000.0
    return WindowFigures(
        name, {"5h": "5-hour", "7d": "weekly"}[name], calibrated, capacity, 800.0 - left, 200.0, 800.0, left,
        minutes_left, NOW + timedelta(minutes=minutes_left), None, burn, 0.0, True, True,
    )


def at(minutes: float, name: str = "5h", minutes_left: float = 240.0) -> RunOut:
    label = {"5h": "5-hour", "7d": "weekly"}[name]
    return RunOut(name, label, NOW + timedelta(minutes=minutes), NOW + timedelta(minutes=minutes_left))


@pytest.mark.parametrize(
    ("windows", "notice_minutes", "expected"),
    [
        pytest.param([window(left=20.0, burn=1.0)], 30, [at(20)], id="runs out in 20 minutes"),
        pytest.param([window(left=30.0, burn=1.0)], 30, [at(30)], id="exactly at the notice horizon"),
        pytest.param([window(left=31.0, burn=1.0)], 30, [], id="past the horizon"),
        pytest.param([window(left=60.0, burn=3.0)], 30, [at(20)], id="the fleet's whole burn"),
        pytest.param([window(left=20.0, burn=1.0, minutes_left=15)], 30, [], id="the rollover comes first"),
        pytest.param([window(left=20.0, burn=0.0)], 30, [], id="nothing burning"),
        pytest.param([window(left=20.0, burn=None, calibrated=False)], 30, [], id="fraction mode: no burn to project"),
        pytest.param([window(left=0.0)], 30, [], id="already spent: the ceiling pauses now"),
        pytest.param([window(left=-5.0)], 30, [], id="overspent"),
        pytest.param([window(left=20.0)], 0, [], id="notice off"),
        pytest.param([window("5h", left=25.0, burn=1.0), window("7d", left=10.0, burn=1.0, minutes_left=3000)], 30,
                     [at(10, "7d", 3000), at(25)], id="two windows, earliest first"),
        pytest.param([window("5h", left=100.0, burn=1.0), window("7d", left=10.0, burn=1.0, minutes_left=3000)], 30,
                     [at(10, "7d", 3000)], id="only the weekly window"),
    ],
)
def test_which_windows_run_out_and_when(
    windows: list[WindowFigures], notice_minutes: float, expected: list[RunOut]
) -> None:
    assert list(running_out(windows, NOW, notice_minutes)) == expected


RESET = datetime(2026, 11, 2, 13, 0, tzinfo=UTC)  # four hours after the tests' T0


def _ending_scene(engine: Engine, clock: Any) -> Scene:
    scene = Scene(engine, clock, max_sessions=6, turn_minutes=600, burn=1.0)
    scene.quota.reset_5h = RESET
    scene.quota.capacity_7d = 100_000  # only the 5-hour window binds here
    return scene


def _running_out(scene: Scene) -> None:
    # Three quota-spending turns burn $3/min; $60 of the $800 spot budget is left: 20 minutes.
    # Ten minutes' projection ($30) still fits, so the ceiling pauses nothing yet.
    scene.quota.spent_5h = 740


def test_running_spot_sessions_are_told_once_per_window(any_engine: Engine, clock: Any) -> None:
    scene = _ending_scene(any_engine, clock)
    a, b = scene.start(), scene.start()
    p = scene.start(cls="priority")
    scene.start(runtime="codex")  # spends nothing against the windows: never paused, never told
    assert scene.sweep().noticed == []  # nothing runs out soon
    _running_out(scene)
    report = scene.sweep()
    assert report.paused == [] and sorted(report.noticed) == sorted([a, b])
    told = {c["session_id"]: c for c in scene.events(EVENT)}
    assert set(told) == {a, b} and p not in told
    assert told[a]["runs_out_at"] == clock.now() + timedelta(minutes=20)
    assert (told[a]["window"], told[a]["label"], told[a]["resets_at"]) == ("5h", "5-hour", RESET)

    for _ in range(3):  # later sweeps inside the same window tell nobody again
        scene.advance(minutes=5)
        assert scene.sweep().noticed == []
    again = _ending_scene(any_engine, clock)  # a restart, or another replica's sweep: the record is the database's
    _running_out(again)
    assert again.sweep().noticed == []
    assert len(scene.events(EVENT)) == 2

    scene.advance(hours=4)  # the window rolls over: a new window instance may tell them again
    scene.quota.reset_5h = RESET + timedelta(hours=5)
    assert sorted(scene.sweep().noticed) == sorted([a, b])
    assert len(scene.events(EVENT)) == 4


def test_the_providers_warning_tells_running_spot_sessions_once_before_any_projection(
    any_engine: Engine, clock: Any
) -> None:
    """`allowed_warning` in an agent's stream (P18): the provider says the window is nearly spent
    before Pacer's own projection does. The sessions the ceiling would pause are told once, that
    the budget may run out before the rollover."""
    scene = _ending_scene(any_engine, clock)
    a, b = scene.start(), scene.start()
    scene.start(cls="priority")
    scene.quota.spent_5h = 100  # $700 of the spot budget left: no projection names the window
    assert scene.sweep().noticed == []
    scene.quota.warned_5h = True
    assert sorted(scene.sweep().noticed) == sorted([a, b])
    told = {c["session_id"]: c for c in scene.events(EVENT)}
    assert (told[a]["window"], told[a]["runs_out_at"], told[a]["resets_at"]) == ("5h", RESET, RESET)
    assert render("text/budget_ending.j2", label="5-hour", runs_out_at=RESET, resets_at=RESET) == (
        "The provider warns that the 5-hour window is nearly spent: its spot budget may run out before the window "
        "rolls over at 2026-11-02 13:00 UTC. If it does, this session is paused, keeping what it has written, and "
        "resumes by itself after the rollover. Make it priority to keep it running."
    )
    scene.advance(minutes=5)
    assert scene.sweep().noticed == []  # once per window instance


def test_a_sweep_that_pauses_tells_nobody_it_will(engine: Engine, clock: Any) -> None:
    scene = _ending_scene(engine, clock)
    scene.start(), scene.start()
    scene.quota.spent_5h = 790  # ten minutes' projection crosses the spot budget: paused now
    report = scene.sweep()
    assert len(report.paused) == 2 and report.noticed == [] and scene.events(EVENT) == []


def test_notice_minutes_zero_tells_nobody(engine: Engine, clock: Any) -> None:
    scene = _ending_scene(engine, clock)
    scene.ctx.limits.notice_minutes = 0
    scene.start(), scene.start(), scene.start()
    _running_out(scene)
    assert scene.sweep().noticed == [] and scene.events(EVENT) == []


SENTENCE = (
    "At the present burn the 5-hour window's spot budget runs out at about 2026-11-02 09:20 UTC. This session is "
    "paused by "
    "then, keeping what it has written, and resumes by itself after the window rolls over at 2026-11-02 13:00 UTC."
)


def test_the_notice_reaches_the_sessions_slack_thread(engine: Engine, clock: Any, mock: MockSlack) -> None:
    scene = _ending_scene(engine, clock)
    scene.ctx.ports.notifier = SlackNotifier(
        engine, WebClient(token=BOT_TOKEN, base_url=mock.api_url), ops_channel="C0OPS"
    )
    message = {"channel": "C0WORK", "ts": "1790000000.000100", "user": "UMEM", "channel_type": "channel"}
    sid = scene.start(
        genesis="slack", title="Fix the flaky test", requester="UMEM", source={"slack": thread_source(message)}
    )
    asked = scene.start(genesis="command", title="Tidy the docs", requester="UASK", source={"surface": "slack"})
    scene.start(genesis="command", title="From the console", requester="ops", source={"surface": "console"})
    mock.calls.clear()
    _running_out(scene)
    scene.sweep()
    calls = {c.body["channel"]: c.body for c in mock.calls_to("chat.postMessage")}
    assert set(calls) == {"C0WORK", "UASK"}  # the console's session has no Slack to be told in
    thread = calls["C0WORK"]
    assert thread["thread_ts"] == "1790000000.000100"
    assert thread["text"].startswith(f":hourglass_flowing_sand: *#{sid}* Fix the flaky test will be paused soon.\n")
    assert SENTENCE in thread["text"]
    (button,) = thread["blocks"][-1]["elements"]
    assert (button["action_id"], button["value"]) == (SESSION_PRIORITY, str(sid))
    dm = calls["UASK"]
    assert "thread_ts" not in dm and f"*#{asked}* Tidy the docs will be paused soon." in dm["text"]

    mock.calls.clear()
    scene.advance(minutes=5)
    scene.sweep()
    assert mock.calls_to("chat.postMessage") == []  # once


@pytest.fixture
def fake() -> Iterator[FakeGithub]:
    server = FakeGithub().start()
    yield server
    server.stop()


def test_the_status_comment_shows_the_notice_until_the_pause(engine: Engine, clock: Any, fake: FakeGithub) -> None:
    scene = _ending_scene(engine, clock)
    with session_scope(engine) as db:
        db.add(Trigger(name="issues", kind="github_issue", prompt_template="{{ title }}", created_at=clock.now()))
    parsed = parse("issues", issue_payload("opened", number=7), bot_login="pacer[bot]")
    assert isinstance(parsed, IntakeEvent)
    (sid,) = github_event(scene.ctx, parsed)
    scene.start(), scene.start()
    status = StatusComments(
        engine, PyGithubComments(GithubClients(base_url=fake.url + "/", token="ghp_test", write_seconds=0)), clock=clock
    )
    scene.ctx.ports.notifier = status
    comment = status.refresh(sid)
    assert (
        comment is not None
        and "Started" in fake.comments[comment]["body"]
        and "spot budget" not in fake.comments[comment]["body"]
    )

    _running_out(scene)
    assert sid in scene.sweep().noticed
    assert status.drain()
    body = fake.comments[comment]["body"]
    assert "Started: an agent is working on this now." in body and SENTENCE in body

    scene.advance(minutes=15)
    scene.quota.spent_5h = 790  # the budget ran out as foretold: the session is paused, and says so instead
    assert sid in scene.sweep().paused
    assert status.drain()
    body = fake.comments[comment]["body"]
    assert "Paused" in body and SENTENCE not in body
    status.close()
