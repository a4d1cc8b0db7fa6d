"""The App Home follows the queue: after someone opens it, every change to the queue publishes
it again for them, off the request thread, at most once an interval, ending on the final state.

Real parts throughout: signed events into the real Bolt app, sessions created through the real
REST API of the same process, the mock Slack Web API on loopback recording each views.publish.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from sqlmodel import col, select

from bot.slack.home_refresh import SETTLE_SECONDS, HomeRefresher
from scheduler.store.models import Session, SlackHomeViewer
from tests.support.api_client import TOKEN
from tests.support.harness import SetQuota
from tests.support.slack_mock import Call, MockSlack, serving

INTERVAL = 1.0  # the tests' refresh interval; production waits five seconds between passes


@pytest.fixture
def live(engine, clock, deferrer, mock: MockSlack):  # type: ignore[no-untyped-def]
    with serving(engine, clock, deferrer, mock, PACER_API_TOKEN=TOKEN) as client:
        client.surface.notices.home.interval = INTERVAL
        yield client


def _publishes(mock: MockSlack, user: str) -> list[Call]:
    return [c for c in mock.calls_to("views.publish") if c.body["user_id"] == user]


def _text(call: Call) -> str:
    return "\n".join(
        b["text"]["text"]
        if "text" in b and isinstance(b["text"], dict)
        else " ".join(e.get("text", "") for e in b.get("elements", []))
        for b in call.body["view"]["blocks"]
    )


def _open(slack: Any, user: str, event_id: str) -> Call:
    slack.event({"type": "app_home_opened", "user": user, "channel": "D0DM", "tab": "home"}, event_id=event_id)
    (call,) = slack.mock.wait_for(
        lambda calls: [c for c in calls if c.method == "views.publish" and c.body["user_id"] == user]
    )
    return call


def _create(slack: Any, prompt: str) -> int:
    r = slack.http.post("/api/v1/sessions", json={"prompt": prompt}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 201, r.text
    return int(r.json()["session"]["id"])


def test_a_session_created_through_the_api_republishes_the_home_of_whoever_opened_it(live, mock: MockSlack) -> None:
    first = _open(live, "UMEM", "EvLIVE1")
    assert "Spot gate on" in _text(first) and "tidy the changelog" not in _text(first)
    created_at = time.perf_counter()
    sid = _create(live, "tidy the changelog")
    second = mock.wait_for(
        lambda calls: [c for c in calls if c.method == "views.publish" and c.at > created_at], timeout=5
    )[0]
    latency = second.at - created_at
    assert second.body["user_id"] == "UMEM"
    assert f"*#{sid}* tidy the changelog" in _text(second)
    assert "Slots: 1.0 of 10 in use (0 priority, 1 spot running)" in _text(second)  # the card moved with the queue
    assert latency < 3, f"republished {latency:.2f}s after the change"
    print(f"republish latency: {latency:.3f}s")


def test_a_burst_of_twenty_changes_publishes_a_bounded_number_of_times_ending_on_the_final_state(
    live, mock: MockSlack
) -> None:
    live.pacer.ctx.ports.quota = SetQuota(clock=live.pacer.clock)  # a real gate: ten slots, then holds
    _open(live, "UMEM", "EvLIVE2")
    _open(live, "UOPS", "EvLIVE3")
    began = time.perf_counter()
    ids = []
    for n in range(20):  # spread over two intervals, so the rate limit and not one pass bounds it
        ids.append(_create(live, f"burst task {n}"))
        time.sleep(0.1)
    burst = time.perf_counter() - began
    time.sleep(INTERVAL + SETTLE_SECONDS + 0.5)  # the trailing pass after the last change
    live.surface.notices.home.close()
    with live.pacer.db() as db:
        statuses = [row.status for row in db.exec(select(Session)).all()]
        held = len(db.exec(select(Session).where(col(Session.hold_reason).is_not(None))).all())
    running = statuses.count("running")
    assert running + statuses.count("waiting") == 20 and held > 0  # the gate held some: the card has news
    for user in ("UMEM", "UOPS"):
        after = [c for c in _publishes(mock, user) if c.at > began]
        bound = 2 + int(burst / INTERVAL)  # one pass at the burst's start, then one an interval
        print(f"{user}: {len(after)} publishes for 20 changes over {burst:.2f}s (bound {bound})")
        assert 1 <= len(after) <= bound
        final = _text(after[-1])
        assert all(f"*#{sid}* burst task" in final for sid in ids), "the last publish shows every session"
        assert (
            f"Slots: {running}.0 of 10 in use (0 priority, {running} spot running)" in final
            and f"queue: {held} held" in final
        )


def test_nobody_who_opened_it_more_than_a_day_ago_is_republished(live, mock: MockSlack, clock) -> None:
    _open(live, "UMEM", "EvLIVE4")
    clock.advance(timedelta(hours=25))
    began = time.perf_counter()
    _create(live, "after a day")
    time.sleep(SETTLE_SECONDS + 0.5)
    assert [c for c in _publishes(mock, "UMEM") if c.at > began] == []


def test_a_failed_publish_is_one_log_line_and_the_next_viewer_still_gets_theirs(engine, clock, caplog) -> None:
    from bot.config.settings import load
    from bot.runtime.process import Pacer
    from scheduler.testing import VirtualDeferrer
    from tests.support.slack_mock import make_pacer

    pacer: Pacer = make_pacer(engine, clock, VirtualDeferrer(clock), load({}, toml_path=None))
    with pacer.db() as db:
        db.add(SlackHomeViewer(user_id="UBAD", opened_at=clock.now()))
        db.add(SlackHomeViewer(user_id="UGOOD", opened_at=clock.now()))
    published: list[str] = []

    def publish(user: str) -> None:
        if user == "UBAD":
            raise RuntimeError("ratelimited")
        published.append(user)

    refresher = HomeRefresher(pacer, publish, interval=0.1)
    refresher.notify("held", {"session_id": 1})
    refresher.notify("github_control", {"session_id": 1})  # not a change to the queue
    deadline = time.monotonic() + 5
    while refresher.passes < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    refresher.close()
    assert published == ["UGOOD"]
    lines = [r.getMessage() for r in caplog.records if "was not republished" in r.getMessage()]
    assert lines == ["slack: the App Home of UBAD was not republished: RuntimeError: ratelimited"]


def test_viewers_are_remembered_once_each_newest_first_and_forgotten_after_a_day(any_engine, clock) -> None:
    from bot.config.settings import load
    from bot.slack.home import recent_viewers, remember_viewer
    from scheduler.testing import VirtualDeferrer
    from tests.support.slack_mock import make_pacer

    pacer = make_pacer(any_engine, clock, VirtualDeferrer(clock), load({}, toml_path=None))
    remember_viewer(pacer, "UOLD", clock.now())
    remember_viewer(pacer, "UMEM", clock.now() + timedelta(hours=1))
    remember_viewer(pacer, "UOPS", clock.now() + timedelta(hours=2))
    remember_viewer(pacer, "UMEM", clock.now() + timedelta(hours=3))  # opened again: one row, newer
    assert recent_viewers(pacer, clock.now() + timedelta(hours=3)) == ["UMEM", "UOPS", "UOLD"]
    assert recent_viewers(pacer, clock.now() + timedelta(hours=25)) == ["UMEM", "UOPS"]
    remember_viewer(pacer, "UOPS", clock.now() + timedelta(hours=26))  # an opening prunes the stale rows
    with pacer.db() as db:
        assert sorted(row.user_id for row in db.exec(select(SlackHomeViewer)).all()) == ["UMEM", "UOPS"]
