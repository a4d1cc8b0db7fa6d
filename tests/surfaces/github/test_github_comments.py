"""The sticky status comment, through real PyGithub against a fake GitHub REST API on loopback:
one comment per issue, created once, then edited as the session moves; never from a request."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DBSession
from sqlmodel import select

from bot.github.events import IntakeEvent, parse
from bot.github.intake import github_event
from bot.runtime.notices import install_status_comments
from integrations.github.client import GithubClients
from integrations.github.comments import PyGithubComments, StatusComments
from integrations.github.status import MARKER, RESULT_CHARS, StatusView, Where, read_status, render_body, status_view
from integrations.latest_result import LatestResult
from scheduler.rules.genesis import SchedulingClass
from scheduler.store.db import session_scope
from scheduler.store.models import Session, StatusComment, Trigger
from tests.support.github_support import FakeGithub, issue_payload, make_pacer
from tests.support.harness import build, new


@pytest.fixture
def fake() -> Iterator[FakeGithub]:
    server = FakeGithub().start()
    yield server
    server.stop()


def _port(fake: FakeGithub) -> PyGithubComments:
    return PyGithubComments(GithubClients(base_url=fake.url + "/", token="ghp_test", write_seconds=0))


def _event(number: int = 7, action: str = "opened", **kw: Any) -> IntakeEvent:
    parsed = parse("issues", issue_payload(action, number=number, **kw), bot_login="pacer[bot]")
    assert isinstance(parsed, IntakeEvent)
    return parsed


def _issue_trigger(engine: Engine, clock: Any) -> None:
    with session_scope(engine) as db:
        db.add(Trigger(name="issues", kind="github_issue", prompt_template="{{ title }}", created_at=clock.now()))


def test_one_comment_is_created_then_edited_as_the_session_moves(engine: Engine, clock: Any, fake: FakeGithub) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=1, turn_minutes=20)
    _issue_trigger(engine, clock)
    (session_id,) = github_event(ctx, _event())
    status = StatusComments(engine, _port(fake), clock=clock)

    first = status.refresh(session_id)
    assert [(c.method, c.path) for c in fake.writes()] == [("POST", "/repos/octo/app/issues/7/comments")]
    assert fake.comments[first]["body"].startswith(MARKER) and "Started" in fake.comments[first]["body"]
    assert status.refresh(session_id) is None  # nothing moved: GitHub is not asked at all
    assert len(fake.writes()) == 1

    deferrer.advance(timedelta(minutes=21))  # the turn ends
    assert status.refresh(session_id) == first
    assert [(c.method, c.path) for c in fake.writes()] == [
        ("POST", "/repos/octo/app/issues/7/comments"),
        ("PATCH", f"/repos/octo/app/issues/comments/{first}"),
    ]
    assert list(fake.comments) == [first] and "Done." in fake.comments[first]["body"]
    with DBSession(engine) as db:
        row = db.exec(select(StatusComment)).one()
    assert (row.repository, row.number, row.comment_id) == ("octo/app", 7, first)


def test_a_lost_comment_id_is_found_again_by_the_marker_not_duplicated(
    engine: Engine, clock: Any, fake: FakeGithub
) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=1)
    _issue_trigger(engine, clock)
    (session_id,) = github_event(ctx, _event())
    status = StatusComments(engine, _port(fake), clock=clock)
    first = status.refresh(session_id)
    with session_scope(engine) as db:
        db.delete(db.exec(select(StatusComment)).one())
    deferrer.advance(timedelta(minutes=30))
    assert status.refresh(session_id) == first
    assert [c.method for c in fake.writes()] == ["POST", "PATCH"]
    assert list(fake.comments) == [first]


def test_a_comment_deleted_on_github_is_made_again(engine: Engine, clock: Any, fake: FakeGithub) -> None:
    ctx, deferrer, _workers, _quota = build(engine, clock, max_sessions=1)
    _issue_trigger(engine, clock)
    (session_id,) = github_event(ctx, _event())
    status = StatusComments(engine, _port(fake), clock=clock)
    first = status.refresh(session_id)
    fake.comments.clear()
    deferrer.advance(timedelta(minutes=30))
    second = status.refresh(session_id)
    assert second != first and list(fake.comments) == [second]


def test_notices_reach_github_off_the_request_and_coalesce(
    engine: Engine, clock: Any, deferrer: Any, fake: FakeGithub
) -> None:
    pacer = make_pacer(engine, clock, deferrer)
    status = install_status_comments(pacer, port=_port(fake))
    assert status is not None
    _issue_trigger(engine, clock)
    (session_id,) = github_event(pacer, _event())  # emits "started" through the runtime's notifier
    assert status.drain(10)
    assert [c.method for c in fake.writes()] == ["POST"]
    for _ in range(5):  # a burst of notices for one session: at most one more refresh queued
        pacer.ctx.emit("held", session_id=session_id)
    assert status.drain(10)
    assert [c.method for c in fake.writes()] == ["POST"]  # the row did not move: nothing to edit
    pacer.ctx.emit("started", session_id=new(pacer.ctx, genesis="api"))  # not a GitHub session
    assert status.drain(10)
    assert len(fake.writes()) == 1
    status.close()


def test_the_hold_label_shows_on_the_comment_and_leaves_it_when_removed(
    engine: Engine, clock: Any, deferrer: Any, fake: FakeGithub
) -> None:
    pacer = make_pacer(engine, clock, deferrer)
    status = install_status_comments(pacer, port=_port(fake))
    assert status is not None
    with session_scope(engine) as db:  # a busy repository: the issue's session waits its turn
        db.add(Trigger(name="issues", kind="github_issue", prompt_template="{{ title }}", created_at=clock.now()))
    github_event(pacer, _event(number=1))
    github_event(pacer, _event(number=2))
    github_event(pacer, _event(number=2, action="labeled", label="pacer:hold", sender="carol"))
    assert status.drain(10)
    (comment,) = [c for c in fake.comments.values() if c["issue"] == "octo/app#2"]
    assert "On hold: The pacer:hold label is on octo/app#2 (added by github:carol)" in comment["body"]
    github_event(pacer, _event(number=2, action="unlabeled", label="pacer:hold", sender="carol"))
    assert status.drain(10)
    assert "On hold" not in comment["body"]
    assert len([c for c in fake.writes() if c.method == "POST"]) == 2  # one comment per issue, ever
    status.close()


@pytest.mark.parametrize(("setting", "least", "most"), [(None, 0.9, 5.0), ("0", 0.0, 0.9)])
def test_writes_to_github_are_a_second_apart_unless_the_setting_says_otherwise(
        fake: FakeGithub, setting: str | None, least: float, most: float) -> None:
    """GitHub asks for a second between writes (its secondary rate limits): PyGithub spaces them by
    default, as shipped; PACER_GITHUB_WRITE_SECONDS=0 is for a stand-in on loopback."""
    from bot.config.settings import load
    from bot.runtime.adapters import github_clients

    environ = {"GITHUB_TOKEN": "ghp_test", "GITHUB_API_URL": fake.url + "/"}
    clients = github_clients(load(environ | ({"PACER_GITHUB_WRITE_SECONDS": setting} if setting else {}),
                                  toml_path=None))
    assert clients is not None
    port = PyGithubComments(clients)
    port.upsert(Where("octo/app", 7, None), "one", comment_id=None)
    started = time.monotonic()
    port.upsert(Where("octo/app", 8, None), "two", comment_id=None)
    assert least <= time.monotonic() - started < most
    assert [c.method for c in fake.writes()] == ["POST", "POST"]


def test_without_a_token_or_app_the_comments_are_off(engine: Engine, clock: Any, deferrer: Any) -> None:
    pacer = make_pacer(engine, clock, deferrer)
    assert install_status_comments(pacer) is None


def test_a_held_spot_session_reports_its_place_in_the_spot_queue(engine: Engine, clock: Any) -> None:
    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=1)
    _issue_trigger(engine, clock)
    for number in (1, 2, 3):
        github_event(ctx, _event(number=number))
    with DBSession(engine) as db:
        third = db.exec(select(Session).where(Session.title.startswith("octo/app#3"))).one()  # type: ignore[attr-defined]
        where, view = read_status(db, third.id or 0, clock.now()) or (None, None)
    assert where is not None and where.repository == "octo/app" and where.number == 3
    assert view is not None and view.state == "queued" and (view.position, view.queued) == (2, 2)
    assert view.why and view.until is not None  # the gate's sentence and the next ask
    body = render_body(view)
    assert "position 2 of 2" in body and view.why in body


def _row(**kw: Any) -> Session:
    fields: dict[str, Any] = {"id": 4, "title": "octo/app#7 t", "status": "waiting", "created_at": None}
    fields.update(kw)
    return Session(**fields)


@pytest.mark.parametrize(
    "row, cls, state",
    [
        (_row(status="archived"), SchedulingClass.SPOT, "archived"),
        (_row(status="running"), SchedulingClass.SPOT, "started"),
        (_row(status="done"), SchedulingClass.PRIORITY, "done"),
        (_row(status="blocked"), SchedulingClass.SPOT, "failed"),
        (_row(status="needs_input"), SchedulingClass.PRIORITY, "paused"),
        (_row(pause_reason="ceiling", pause_detail="The budget ceiling paused it."), SchedulingClass.SPOT, "paused"),
        (_row(hold_reason="fleet_at_cap", hold_sentence="Held until a slot frees."), SchedulingClass.SPOT, "queued"),
        (_row(hold_reason="queue_hold", hold_sentence="Held: the queue is held."), SchedulingClass.PRIORITY, "held"),
        (_row(), SchedulingClass.PRIORITY, "queued"),
    ],
)
def test_the_status_view_follows_the_row(row: Session, cls: SchedulingClass, state: str, clock: Any) -> None:
    view = status_view(row, cls, clock.now(), error="boom")
    assert view.state == state
    assert render_body(view).startswith(MARKER + "\n**Pacer** · session #4")


def test_a_sleeping_session_is_paused_until_its_wake(clock: Any) -> None:
    wake = clock.now() + timedelta(hours=2)
    view = status_view(_row(wake_at=wake), SchedulingClass.SPOT, clock.now())
    assert view == StatusView("paused", 4, "octo/app#7 t", "spot", until=wake)


def _result(**kw: Any) -> LatestResult:
    fields: dict[str, Any] = {
        "output": "",
        "error": None,
        "cost_usd": 0.25,
        "duration_ms": 4000,
        "turns": 1,
        "cost_total_usd": 0.25,
    }
    return LatestResult(**(fields | kw))


def test_a_failed_turn_shows_its_error_and_a_failure_with_output_shows_both() -> None:
    bare = render_body(StatusView("failed", 4, "octo/app#7 t", "spot", work=_result(error="exit 2: agent crashed")))
    assert "<summary>Latest turn failed · $0.25 · 4.0 s · turn 1</summary>" in bare and "exit 2: agent crashed" in bare
    both = render_body(
        StatusView("failed", 4, "octo/app#7 t", "spot", work=_result(output="half done", error="timed out"))
    )
    assert "<summary>Latest result" in both and "> timed out" in both and "half done" in both


def test_a_result_past_what_a_comment_holds_says_how_much_is_left_out_and_where_it_is() -> None:
    output = "".join(f"{n:06d}\n" for n in range(10_000))  # 70,000 characters
    body = render_body(StatusView("done", 4, "octo/app#7 t", "spot", work=_result(output=output)))
    assert len(body) <= 65_536 and output[:RESULT_CHARS] in body
    assert (
        f"*({len(output) - RESULT_CHARS:,} more characters are not shown here" in body
        and "GET /api/v1/sessions/4" in body
    )


def test_the_agents_tool_name_cannot_break_out_of_its_code_span_or_mention(engine: Engine, clock: Any) -> None:
    """The stream is the agent's, so a tool's name is as hostile as its todo list: a backtick in it
    must not end the code span it is shown in, and an "@" in it must not mention anyone."""
    from integrations.runners.progress import as_plain, next_progress
    from scheduler.engine.leases import record_progress
    from scheduler.ports import TurnProgress
    from scheduler.store.models import Turn

    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=1)
    ctx.owner = "a"
    _issue_trigger(engine, clock)
    (session_id,) = github_event(ctx, _event())
    hostile = "x` @octo/admins [approve](https://evil.example) `y"
    line = json.dumps({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": hostile}]}})
    progress = next_progress(TurnProgress(), line)
    assert progress.tool == hostile
    with DBSession(engine) as db:
        turn_id = db.exec(select(Turn.id).where(Turn.session_id == session_id)).one()
    assert record_progress(engine, turn_id, "a", as_plain(progress), clock.now()) == session_id
    with DBSession(engine) as db:
        _where, view = read_status(db, session_id, clock.now()) or (None, None)
    assert view is not None and view.state == "started"
    (now,) = [line for line in render_body(view).splitlines() if line.startswith("**Now:**")]
    assert "@octo" not in now
    assert now.startswith("**Now:** `") and now.split("`")[1] == hostile.replace("`", "'").replace("@", "@\u2060")


def test_a_progress_edit_slower_than_the_gap_is_not_followed_at_once(
    engine: Engine, clock: Any, fake: FakeGithub
) -> None:
    """GitHub can take longer than the gap to answer (its retries, its rate-limit waits): a
    progress change told meanwhile is written a gap after that edit ends, not the moment it
    ends, and still written."""
    from integrations.runners.progress import as_plain
    from scheduler.engine.leases import record_progress
    from scheduler.ports import TurnProgress
    from scheduler.store.models import Turn

    ctx, _deferrer, _workers, _quota = build(engine, clock, max_sessions=1)
    ctx.owner = "a"
    _issue_trigger(engine, clock)
    (session_id,) = github_event(ctx, _event())
    with DBSession(engine) as db:
        turn_id = db.exec(select(Turn.id).where(Turn.session_id == session_id)).one()
    route = fake._route

    def slow(method: str, path: str, body: Any, query: Any) -> Any:
        if method == "POST":
            time.sleep(1.0)  # the first write is slow
        return route(method, path, body, query)

    fake._route = slow  # type: ignore[method-assign]
    gap = 0.3
    status = StatusComments(engine, _port(fake), clock=clock, progress_seconds=gap)
    try:
        for used in (1, 2, 3):  # the first posts (slowly); two more changes told while it is on its way
            record_progress(engine, turn_id, "a", as_plain(TurnProgress(tool="Read", tools_used=used)), clock.now())
            status.notify("progress", {"session_id": session_id})
            time.sleep(gap + 0.05)
        time.sleep(1.5)
        assert status.drain(10)
    finally:
        status.close()
    writes = fake.writes()
    assert [c.method for c in writes] == ["POST", "PATCH"], [c.body for c in writes]
    assert "3 tool calls" in writes[1].body["body"]
    assert writes[1].at - writes[0].at >= 1.0 + gap - 0.05, writes[1].at - writes[0].at
