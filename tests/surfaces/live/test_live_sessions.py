"""What the live page says of each session (GET / and GET /live/state over real HTTP into the real
app, a real SQLite file): who asked and where, how long, its cost so far from its turns; the
sessions that finished or failed in the last day; the early notice running sessions were given and
the preemption cycling report; and the day's axis in UTC clock time."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlmodel import select

from scheduler.front import Session, Status, Turn, session_scope
from scheduler.store.models import BudgetNotice, PreemptionEvent
from tests.support import harness
from tests.support.api_client import TOKEN, Api, make_api

H = timedelta(hours=1)
ISSUE = "https://github.com/acme/api/issues/12"
OPENED = "https://github.com/acme/api/pull/13"


@pytest.fixture
def api(engine, clock) -> Iterator[Api]:
    api = make_api(engine, clock, max_sessions=1, turn_minutes=30)
    yield api
    api.close()


def create(api: Api, prompt: str, **body: Any) -> int:
    r = api.post("/sessions", {"prompt": prompt, **body})
    assert r.status_code == 201, r.text
    return int(r.json()["session"]["id"])


def rewrite(api: Api, session_id: int, **fields: Any) -> None:
    with session_scope(api.pacer.engine) as db:
        row = db.get(Session, session_id)
        assert row is not None
        for name, value in fields.items():
            setattr(row, name, value)
        db.add(row)


def turn(api: Api, session_id: int, **fields: Any) -> None:
    with session_scope(api.pacer.engine) as db:
        db.add(Turn(session_id=session_id, **{"created_at": api.pacer.clock.now(), **fields}))


def page(api: Api) -> str:
    client = httpx.Client(base_url=api.server.url, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"})
    with client:
        answer = client.get("/")
        assert answer.status_code == 200
        state = client.get("/live/state").json()
    assert all(state["sections"][name] in answer.text for name in state["sections"]), "the poll gives what the page has"
    return answer.text


def row_of(html: str, table: str, session_id: int) -> str:
    found = re.search(rf'<table class="{table} sessions">.*?</table>', html, re.S)
    assert found, f"no {table} table"
    cells = re.search(rf'<tr class="row [^"]*" data-session-id="{session_id}">(.*?)</tr>', found.group(0), re.S)
    assert cells, f"#{session_id} is not in the {table} table"
    return re.sub(r"\s+", " ", cells.group(1))


def test_each_open_session_shows_who_asked_where_how_long_and_its_cost_so_far(api: Api) -> None:
    now = api.pacer.clock.now()
    running = create(api, "running work")
    waiting = create(api, "waiting work")
    rewrite(api, running, requester="alice", created_at=now - 95 * H / 60,
            source={"kind": "github", "repository": "acme/api", "number": 12, "url": ISSUE,
                    "workspace": {"pull_request": {"number": 13, "url": OPENED}}})
    rewrite(api, waiting, requester="U0BOB", created_at=now - 3 * H,
            source={"slack": {"channel": "C0OPS", "thread_ts": "1700000000.000100"}})
    with session_scope(api.pacer.engine) as db:  # the running turn began 20 minutes ago, after one of $1.25
        for t in db.exec(select(Turn).where(Turn.session_id == running)).all():
            t.started_at = now - 20 * H / 60
            db.add(t)
    turn(api, running, status="done", cost_usd=1.25, started_at=now - H, finished_at=now - 50 * H / 60)
    html = page(api)

    first = row_of(html, "queue", running)
    assert f'<a href="{ISSUE}" rel="noreferrer">acme/api#12</a>' in first
    assert f'<a href="{OPENED}" rel="noreferrer">its pull request #13</a>' in first
    assert '<td data-label="asked by" class="asked">alice</td>' in first
    assert "1 h 35 min" in first and "this turn 20 min" in first and 'title="asked 2026-11-02 07:25 UTC"' in first
    assert "$1.25" in first and "2 turns" in first  # the running turn counts $0 until it reports
    second = row_of(html, "queue", waiting)
    assert '<a href="https://slack.com/app_redirect?channel=C0OPS" rel="noreferrer">Slack thread in C0OPS</a>' in second
    assert "U0BOB" in second and "3 h 00 min" in second and "this turn" not in second
    assert "$0.00" in second and "0 turns" in second


def test_a_link_is_a_web_address_or_nothing() -> None:
    from scheduler.steering.session_facts import links

    assert links({"url": "javascript:alert(1)", "slack": {"channel": "C1\"><b>"}}) == ()
    assert links(None) == () and links({"workspace": "junk"}) == ()
    (only,) = links({"url": OPENED, "repository": "acme/api", "number": 13,
                     "workspace": {"pull_request": {"number": 13, "url": OPENED}}})
    assert (only.kind, only.number) == ("pull_request", 13)  # asked on its own pull request: said once


def test_the_sessions_that_finished_or_failed_in_the_last_day_are_listed(api: Api) -> None:
    now = api.pacer.clock.now()
    ids = {name: harness.new(api.ctx, title=name, requester="alice") for name in
           ("done today", "failed today", "archived today", "done yesterday", "failed last week")}
    rewrite(api, ids["done today"], status=Status.DONE.value, created_at=now - 4 * H, finished_at=now - 2 * H)
    rewrite(api, ids["failed today"], status=Status.FAILED.value, created_at=now - 6 * H, finished_at=now - 5 * H)
    rewrite(api, ids["archived today"], status=Status.ARCHIVED.value, created_at=now - 2 * H, updated_at=now - H)
    rewrite(api, ids["done yesterday"], status=Status.DONE.value, created_at=now - 31 * H, finished_at=now - 30 * H)
    rewrite(api, ids["failed last week"], status=Status.FAILED.value, created_at=now - 170 * H,
            finished_at=now - 168 * H)
    turn(api, ids["done today"], status="done", cost_usd=0.75, finished_at=now - 2 * H)
    turn(api, ids["failed today"], status="failed", error="the agent exited 1: <no credentials>",
         finished_at=now - 5 * H)
    html = page(api)

    assert "Finished in the last 24 hours <small>3 · done: 1 · failed: 1 · archived: 1</small>" in html
    done = row_of(html, "finished", ids["done today"])
    assert "2026-11-02 07:00 UTC" in done and "2 h 00 min" in done and "$0.75" in done and "alice" in done
    failed = row_of(html, "finished", ids["failed today"])
    assert '<small class="error">the agent exited 1: &lt;no credentials&gt;</small>' in failed
    assert "1 h 00 min" in failed
    assert "1 h 00 min" in row_of(html, "finished", ids["archived today"])  # an archive's end is its last update
    assert f'data-session-id="{ids["done yesterday"]}"' not in html
    # A failure older than a day is in `/pacer queue`, not in the page's queue of open work.
    assert f'data-session-id="{ids["failed last week"]}"' not in html
    newest_first = re.findall(r'<tr class="row \w+" data-session-id="(\d+)">', html.split('class="finished')[1])
    assert newest_first == [str(ids[n]) for n in ("archived today", "done today", "failed today")]


def test_finished_since_reads_the_same_on_both_backends(any_engine, clock) -> None:
    from scheduler.front import finished_since

    ctx, *_ = harness.build(any_engine, clock)
    now = clock.now()
    ended = harness.new(ctx, title="ended")
    harness.new(ctx, title="open")
    with session_scope(any_engine) as db:
        row = db.get(Session, ended)
        assert row is not None
        row.status, row.finished_at = Status.BLOCKED.value, now - H
        db.add(row)
        db.add(Turn(session_id=ended, status="failed", error="first", created_at=now - 2 * H, cost_usd=0.5))
        db.add(Turn(session_id=ended, status="failed", error="second", created_at=now - H, cost_usd=0.25))
    with session_scope(any_engine) as db:
        (only,) = finished_since(db, now)
    assert (only.id, only.error, only.facts.spent, only.facts.turns, only.facts.ended_at) == (
        ended, "second", 0.75, 2, now - H)


def test_the_early_notice_and_the_cycling_report_are_on_the_page(api: Api) -> None:
    now = api.pacer.clock.now()
    running = create(api, "running work")
    victim, taker = harness.new(api.ctx, title="nightly refactor"), harness.new(api.ctx, title="hotfix")
    with session_scope(api.pacer.engine) as db:
        db.add(BudgetNotice(session_id=running, window="5h", runs_out_at=now + 25 * H / 60, resets_at=now + 3 * H,
                            sent_at=now))
        for hours in (5, 3, 1):
            db.add(PreemptionEvent(session_id=victim, by_id=taker, at=now - hours * H))
    html = page(api)

    notice = re.search(r'<section id="notices"[^>]*>(.*?)</section>', html, re.S)
    assert notice is not None
    text = re.sub(r"\s+", " ", notice.group(1))
    assert f"#{running} running work</strong>: At the present burn the 5-hour window's spot budget runs out at about " \
           "2026-11-02 09:25 UTC. This session is paused by then" in text.replace("&#39;", "'")
    assert "Preemption cycling (the last 24 h: 3 preemptions, $0.00 lost to halted turns)" in html
    assert f"#{victim} nightly refactor · preempted 3 times (0 halted) by #{taker}" in html


def test_no_notice_and_no_report_leave_nothing_on_the_page(api: Api) -> None:
    html = page(api)
    assert '<section id="notices" aria-label="Early notice"></section>' in html  # hidden by `section:empty`
    assert "Preemption cycling" not in html and "No session finished, failed or was archived" in html


def test_the_day_is_drawn_against_utc_clock_times(api: Api) -> None:
    html = page(api)  # now is 09:00 UTC: the axis runs from 09:00 yesterday
    timeline = html.split('<section id="timeline"')[1].split("</section>")[0]
    labels = re.findall(r'<text class="tick-label[^"]*"[^>]*>([^<]*)</text>', timeline)
    assert labels == ["12:00", "15:00", "18:00", "21:00", "00:00", "03:00", "06:00"]
    assert "-21h" not in timeline and "now" not in labels
