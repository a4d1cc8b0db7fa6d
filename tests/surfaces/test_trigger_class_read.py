"""Reading a trigger's class from `/pacer` (P22 item 9; seed 001's parity row "Read a trigger's
class"): `/pacer trigger <id>` says the class it stamps on every session it starts, or that its
sessions take their genesis's class and which that is now, as `GET /api/v1/triggers/{id}` does —
on the console, a signed Slack `/pacer` (a member may read it) and a GitHub comment. A bad id is
refused with its rule and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import select

from bot.chat import answers
from scheduler.store.db import session_scope
from scheduler.store.models import Trigger
from tests.support.github_support import CommentHook, comment_hook
from tests.support.slack_mock import MockSlack

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _triggers(engine: Engine, now: Any) -> tuple[int, int]:
    with session_scope(engine) as db:
        stamped = Trigger(name="nightly", kind="schedule", scheduling_class="priority", precedence=70,
                          prompt_template="x", config={"cron": "0 3 * * *"}, created_at=now)
        derived = Trigger(name="labels", kind="github_label", prompt_template="x", config={"label": "pacer"},
                          created_at=now, enabled=False)
        db.add(stamped)
        db.add(derived)
        db.flush()
        return stamped.id or 0, derived.id or 0


def _rows(engine: Engine) -> list[dict[str, Any]]:
    with session_scope(engine) as db:
        return [t.model_dump() for t in db.exec(select(Trigger).order_by(Trigger.id))]  # type: ignore[arg-type]


STAMPED = "Trigger {tid} (nightly, schedule): class priority, stamped on every session it starts · precedence 70"
DERIVED = ("Trigger {tid} (labels, github_label, disabled): class default: its sessions take their genesis's class, "
           "spot for github_label now · precedence unset · 0 sessions.")


def test_the_console_and_rest_read_the_same_class(api) -> None:
    stamped, derived = _triggers(api.pacer.engine, api.ctx.clock.now())
    said = answers.answer(api.pacer, "bob", f"trigger {stamped}", surface="console")
    assert said.ok and said.text.startswith(STAMPED.format(tid=stamped)), said.text
    said = answers.answer(api.pacer, "bob", f"trigger #{derived}", surface="console")
    assert said.ok and said.text == DERIVED.format(tid=derived), said.text
    assert api.get(f"/triggers/{stamped}", actor="bob").json()["scheduling_class"] == "priority"
    assert api.get(f"/triggers/{derived}", actor="bob").json()["scheduling_class"] == "default"


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("trigger 999", "trigger #999"),
        ("trigger abc", "trigger id: 'abc' is not an id"),
        ("trigger 0", "trigger id: '0' is out of range"),
        ("trigger {tid} colour", "'colour'"),
        ("trigger", "missing trigger <id>"),
    ],
)
def test_a_bad_trigger_read_is_refused_and_changes_nothing(api, line: str, says: str) -> None:
    stamped, _ = _triggers(api.pacer.engine, api.ctx.clock.now())
    before = _rows(api.pacer.engine)
    said = answers.answer(api.pacer, "bob", line.format(tid=stamped), surface="console")
    assert not said.ok and says in said.text, said.text
    assert "trigger <id>  |  trigger <id> class priority|spot|default" in said.text
    assert _rows(api.pacer.engine) == before


def test_a_member_reads_a_triggers_class_on_slack(slack: Any, mock: MockSlack) -> None:
    stamped, derived = _triggers(slack.pacer.engine, slack.pacer.clock.now())
    assert slack.command(f"trigger {derived}", user="UMEM").status_code == 200
    (answer,) = mock.wait_for_method("/response/cmd", timeout=10)
    assert "class default: its sessions take their genesis's class, *spot* for github_label now" in (
        answer.body["text"]), answer.body
    before = _rows(slack.pacer.engine)
    assert slack.command(f"trigger {stamped} class spot", user="UMEM", name="denied").status_code == 200
    (denied,) = mock.wait_for_method("/response/denied", timeout=10)
    assert "operator" in denied.body["text"] and _rows(slack.pacer.engine) == before


@pytest.fixture
def hook(engine: Engine, clock: Any, deferrer: Any) -> Iterator[CommentHook]:
    with comment_hook(engine, clock, deferrer, PACER_ROSTER="") as served:
        yield served


def test_a_github_comment_reads_a_triggers_class(hook: CommentHook, engine: Engine, clock: Any) -> None:
    stamped, _ = _triggers(engine, clock.now())
    reply = hook.command(f"trigger {stamped}")
    assert STAMPED.format(tid=stamped) in reply, reply
