"""A running turn's live progress, as the process that runs it keeps it on the turn's row
(`scheduler.engine.leases.record_progress`), read by the REST API and the live page over real HTTP
into the real app (a real SQLite file, and PostgreSQL): the tool, the todo list, the time into the
turn and the cost so far; nothing once the turn has ended."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from sqlmodel import select

from scheduler.engine.leases import record_progress
from scheduler.front import Turn, session_scope
from tests.support.api_client import TOKEN, Api, make_api

TODOS = [
    {"content": "Read the parser", "status": "completed", "active_form": "Reading the parser"},
    {"content": "Fix the <off-by-one>", "status": "in_progress", "active_form": "Fixing the <off-by-one>"},
    {"content": "Run the tests", "status": "pending", "active_form": "Running the tests"},
]


@pytest.fixture
def api(any_engine, clock) -> Iterator[Api]:
    api = make_api(any_engine, clock, max_sessions=1, turn_minutes=30)
    yield api
    api.close()


def test_the_api_and_the_live_page_show_what_a_running_agent_is_doing(api: Api) -> None:
    r = api.post("/sessions", {"prompt": "fix the parser"})
    assert r.status_code == 201, r.text
    sid = r.json()["session"]["id"]
    assert r.json()["session"]["progress"] is None  # nothing said yet
    with session_scope(api.pacer.engine) as db:
        turn = db.exec(select(Turn).where(Turn.session_id == sid)).one()
        turn_id, started = turn.id, turn.started_at
    assert turn_id is not None and started is not None
    api.pacer.clock.advance(timedelta(minutes=2, seconds=5))
    said = {"tool": "Edit", "detail": "src/parse.py", "todos": TODOS, "cost_usd": None, "tools_used": 7}
    assert record_progress(api.pacer.engine, turn_id, None, said, api.pacer.clock.now()) == sid

    shown = api.get(f"/sessions/{sid}").json()["progress"]
    assert shown == {
        "turn_id": turn_id, "tool": "Edit", "detail": "src/parse.py", "todos": TODOS, "tools_used": 7,
        "started_at": started.isoformat().replace("+00:00", "Z"),
        "progress_at": api.pacer.clock.now().isoformat().replace("+00:00", "Z"),
        "elapsed_s": 125, "cost_usd": 0.0,
    }

    with httpx.Client(base_url=api.server.url, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        queue = client.get("/live/state").json()["sections"]["queue"]
    row = re.search(rf'data-session-id="{sid}">(.*?)</tr>', queue, re.S)
    assert row is not None
    cell = re.sub(r"\s+", " ", row.group(1))
    assert "now: <code>Edit</code> on <code>src/parse.py</code> · 7 tool calls" in cell
    assert '<li class="todo completed">☑ Read the parser</li>' in cell
    assert '<li class="todo in_progress">▶ Fixing the &lt;off-by-one&gt;</li>' in cell  # the agent's words, escaped
    assert '<li class="todo pending">☐ Run the tests</li>' in cell

    api.deferrer.advance(timedelta(minutes=30))  # the turn ends
    assert api.get(f"/sessions/{sid}").json()["progress"] is None
