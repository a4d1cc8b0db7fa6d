"""The cost cap on the chat surfaces and the API (P15 item 1): `/pacer new --cap $5`, `cap:5`,
`/pacer cap <id> <usd>|none`, cost_cap_usd on create and PATCH; a bad cap is refused with its
rule and changes nothing."""

from __future__ import annotations

import pytest

from bot.chat import answers
from bot.commands import command as c
from bot.commands.grammar import USAGE, parse
from scheduler.errors import CommandError
from tests.support.harness import new, row

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.api(max_sessions=2, turn_minutes=30),
]


def console(api, text: str, actor: str = "alice"):
    return answers.answer(api.pacer, actor, text, surface="console")


@pytest.mark.parametrize(
    ("text", "cap"),
    [
        ("new --cap $5 fix the login", 5.0),
        ("new --spot --cap 2.50 fix the login", 2.5),
        ("new cap:5 fix the login", 5.0),
        ("new repo:acme/web cap:$0.75 fix the login", 0.75),
        ("new fix the login", None),
    ],
)
def test_new_takes_a_cap_as_an_option(text, cap) -> None:
    command = parse(text)
    assert isinstance(command, c.New) and command.cost_cap_usd == cap and command.prompt == "fix the login"


@pytest.mark.parametrize(
    ("text", "message", "usage"),
    [
        ("new --cap abc fix it", "cap: 'abc' is not a cost cap; give US dollars above 0 like 5 or $2.50", USAGE["new"]),
        ("new cap:-5 fix it", "cap: '-5' is not a cost cap", USAGE["new"]),
        ("new cap:none fix it", "cap: 'none' is not a cost cap", USAGE["new"]),
        ("cap 3 abc", "cap: 'abc' is not a cost cap", USAGE["cap"]),
        ("cap 3 nan", "cap: 'nan' is not a cost cap", USAGE["cap"]),
        (
            "cap 3 0",
            "cost_cap_usd: a cost cap must be a finite number of dollars above 0, at most $1,000,000.00",
            USAGE["cap"],
        ),
        ("cap 3 5 6", None, USAGE["cap"]),
    ],
)
def test_a_bad_cap_word_is_a_one_line_error_with_the_usage(text, message, usage) -> None:
    with pytest.raises(CommandError) as caught:
        parse(text)
    assert caught.value.usage == usage
    if message is not None:
        assert str(caught.value).startswith(message), str(caught.value)


def test_the_cap_command_sets_and_clears_the_cap(api) -> None:
    ctx = api.pacer.ctx
    sid = new(ctx, genesis="command", requester="alice")
    said = console(api, f"cap {sid} $5")
    assert said.ok and f"#{sid}'s cost cap changed: none → $5.00. The queue looks again." in said.text, said.text
    assert row(ctx, sid).cost_cap_usd == 5.0
    assert console(api, f"cap {sid} abc").ok is False
    assert row(ctx, sid).cost_cap_usd == 5.0  # refused: nothing moved
    why = console(api, f"why {sid}")
    assert why.text.splitlines()[0].endswith(" · p0 · $0.00 spent of its $5.00 cost cap"), why.text
    queue = console(api, "queue")
    assert "· $0.00 spent of its $5.00 cost cap" in queue.text, queue.text
    said = console(api, f"cap {sid} none")
    assert said.ok and "$5.00 → none" in said.text and row(ctx, sid).cost_cap_usd is None


def test_new_with_a_cap_creates_a_capped_session(api) -> None:
    said = console(api, "new --cap $5 write the release notes")
    assert said.ok, said.text
    r = api.call("GET", "/sessions")
    [session] = r.json()["sessions"]
    assert (session["cost_cap_usd"], session["spent_usd"]) == (5.0, 0.0)


def test_the_api_takes_the_cap_on_create_and_patch_and_refuses_a_bad_one(api) -> None:
    r = api.call("POST", "/sessions", json={"prompt": "go", "cost_cap_usd": 3})
    assert r.status_code == 201, r.text
    sid = r.json()["session"]["id"]
    assert (r.json()["session"]["cost_cap_usd"], r.json()["session"]["spent_usd"]) == (3.0, 0.0)
    for bad in (-1, 0, "abc", 2_000_000):
        r = api.call("PATCH", f"/sessions/{sid}", json={"cost_cap_usd": bad, "precedence": 99})
        assert r.status_code == 422, r.text
        assert "cost_cap_usd" in r.text
    assert (row(api.pacer.ctx, sid).cost_cap_usd, row(api.pacer.ctx, sid).precedence) == (3.0, 0)
    r = api.call("POST", "/sessions", json={"prompt": "go", "cost_cap_usd": -2})
    assert r.status_code == 422 and "cost_cap_usd" in r.text
    r = api.call("PATCH", f"/sessions/{sid}", json={"cost_cap_usd": 7.5})
    assert r.status_code == 200 and r.json()["changed"] == {"cost_cap_usd": [3.0, 7.5]}, r.text
    r = api.call("PATCH", f"/sessions/{sid}", json={"cost_cap_usd": None})
    assert r.status_code == 200 and r.json()["session"]["cost_cap_usd"] is None


def test_the_github_status_comment_and_the_slack_thread_show_spend_and_cap() -> None:
    from datetime import UTC, datetime

    from integrations.github.status import render_body, status_view
    from scheduler.rules.genesis import SchedulingClass
    from scheduler.store.models import Session
    from templates import render

    session = Session(
        id=7, title="fix it", status="running", cost_cap_usd=5.0, created_at=datetime(2026, 12, 1, tzinfo=UTC)
    )
    view = status_view(session, SchedulingClass.PRIORITY, datetime(2026, 12, 1, tzinfo=UTC))
    body = render_body(view.__class__(**{**view.__dict__, "spent": 1.25}))
    assert "**Pacer** · session #7 · priority · $1.25 spent of its $5.00 cost cap" in body
    uncapped = status_view(Session(id=8, title="x", status="running", created_at=datetime(2026, 12, 1, tzinfo=UTC)),
                           SchedulingClass.PRIORITY, datetime(2026, 12, 1, tzinfo=UTC))
    assert "cost cap" not in render_body(uncapped)
    said = render(
        "slack/session_started.j2", session={"id": 7, "title": "fix it", "cost_cap_usd": 5.0, "spent_usd": 1.25}
    )
    assert said == ":arrow_forward: *#7* fix it ($1.25 spent of its $5.00 cost cap) has started."


def test_a_done_session_cap_changes_on_the_api_as_on_the_command(api) -> None:
    from scheduler.store.db import session_scope
    from scheduler.store.models import Session

    ctx = api.pacer.ctx
    sid = new(ctx, requester="alice")
    with session_scope(ctx.engine) as db:
        row_ = db.get(Session, sid)
        row_.status = "done"
        db.add(row_)
    r = api.call("PATCH", f"/sessions/{sid}", json={"cost_cap_usd": 4})
    assert r.status_code == 200 and r.json()["changed"] == {"cost_cap_usd": [None, 4.0]}, r.text
    r = api.call("PATCH", f"/sessions/{sid}", json={"cost_cap_usd": 6, "precedence": 3})
    assert r.status_code == 409 and row(ctx, sid).cost_cap_usd == 4.0, r.text
    assert console(api, f"cap {sid} 5").ok and row(ctx, sid).cost_cap_usd == 5.0
