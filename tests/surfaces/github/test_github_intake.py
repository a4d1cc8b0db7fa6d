"""GitHub intake behind the webhook: trigger matching, the session each event makes (once), the
prompt, prerequisites, and labels as controls — on SQLite and PostgreSQL, in virtual time."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.github.events import IntakeEvent, Kind, parse
from bot.github.intake import IntakeSettings, github_event, record_github
from bot.github.matching import github_trigger_mismatch
from scheduler.holds.prerequisites import unsatisfied
from scheduler.store.db import session_scope
from scheduler.store.models import OperatorHold, Prerequisite, Session, Trigger
from tests.support.github_support import issue_payload
from tests.support.harness import build


def _event(action: str = "opened", *, event: str = "issues", **kw: Any) -> IntakeEvent:
    parsed = parse(event, issue_payload(action, pull_request=event == "pull_request", **kw), bot_login="pacer[bot]")
    assert isinstance(parsed, IntakeEvent), parsed
    return parsed


def _trigger(engine: Engine, now: Any, **fields: Any) -> int:
    with session_scope(engine) as db:
        trigger = Trigger(created_at=now, **fields)
        db.add(trigger)
        db.flush()
        return trigger.id or 0


def _sessions(engine: Engine) -> list[Session]:
    with DBSession(engine) as db:
        return list(db.exec(select(Session).order_by(col(Session.id))).all())


@pytest.fixture
def ctx(any_engine: Engine, clock: Any) -> Any:
    """The real engine with every admission check production installs (holds, groups, …)."""
    context, _deferrer, _workers, _quota = build(any_engine, clock, max_sessions=1, wired=True)
    return context


@pytest.mark.parametrize(
    "kind, config, overrides, mismatch",
    [
        ("github_issue", {}, {}, None),
        ("github_issue", {"repositories": ["Octo/App"]}, {}, None),
        ("github_issue", {"repositories": ["octo/other"]}, {}, "repository octo/app is not in ['octo/other']"),
        ("github_issue", {"authors": ["bob"]}, {}, "author alice is not in ['bob']"),
        ("github_issue", {"labels": ["agent"]}, {"labels": ("Agent", "bug")}, None),
        ("github_issue", {"labels": ["agent"]}, {"labels": ("bug",)}, "the issue carries none of ['agent']"),
        ("github_label", {}, {"action": "labeled", "label": "Pacer"}, None),
        (
            "github_label",
            {"label": "ready"},
            {"action": "labeled", "label": "pacer"},
            "github_label fires on the label 'ready' being added",
        ),
        (
            "github_label",
            {"pull_requests": False},
            {"action": "labeled", "label": "pacer", "event": "pull_request"},
            "this trigger takes issues only",
        ),
        (
            "github_label",
            {"issues": False},
            {"action": "labeled", "label": "pacer"},
            "this trigger takes pull requests only",
        ),
        ("github_label", {}, {"action": "labeled", "label": "pacer", "event": "pull_request"}, None),
        ("schedule", {}, {}, "schedule is not a GitHub trigger"),
    ],
)
def test_trigger_matching(kind: str, config: dict[str, Any], overrides: dict[str, Any], mismatch: str | None) -> None:
    action = overrides.pop("action", "opened")
    assert github_trigger_mismatch(kind, config, _event(action, **overrides)) == mismatch


def test_an_opened_issue_makes_one_session_per_trigger_and_never_a_second(ctx: Any, clock: Any) -> None:
    first = _trigger(ctx.engine, clock.now(), name="a", kind="github_issue", prompt_template="A: {{ title }}")
    second = _trigger(
        ctx.engine,
        clock.now(),
        name="b",
        kind="github_issue",
        prompt_template="B: {{ title }} by {{ author }}",
        scheduling_class="priority",
        precedence=5,
    )
    created = github_event(ctx, _event())
    assert len(created) == 2
    assert github_event(ctx, _event()) == []  # the same issue again: nothing new, whatever the delivery
    rows = _sessions(ctx.engine)
    assert [(s.trigger_id, s.prompt, s.genesis) for s in rows] == [
        (first, "A: The thing is broken", "github_issue"),
        (second, "B: The thing is broken by alice", "github_issue"),
    ]
    assert rows[1].scheduling_class == "priority" and rows[1].precedence == 5  # the trigger's stamp
    assert all(s.concurrency_group == "repo:octo/app" for s in rows)


def test_prerequisites_in_the_title_and_body_are_recorded(ctx: Any, clock: Any) -> None:
    _trigger(ctx.engine, clock.now(), name="a", kind="github_issue", prompt_template="{{ text }}")
    body = "Depends on #12 and other/lib#3.\nAlso needs @#40; see #99 (not a prerequisite). @#7 is itself."
    (session_id,) = github_event(ctx, _event(body=body, title="After @#5"))
    with DBSession(ctx.engine) as db:
        refs = sorted(p.target_ref for p in db.exec(select(Prerequisite).where(Prerequisite.session_id == session_id)))
    assert refs == ["octo/app#12", "octo/app#40", "octo/app#5", "other/lib#3"]


def test_a_session_waits_on_an_open_issue_until_it_closes(ctx: Any, clock: Any) -> None:
    _trigger(ctx.engine, clock.now(), name="a", kind="github_issue", prompt_template="{{ title }}")
    (first,) = github_event(ctx, _event(number=12))  # the prerequisite, running in the only slot
    (waiter,) = github_event(ctx, _event(number=3, repository="octo/lib", body="depends on octo/app#12"))
    assert _sessions(ctx.engine)[1].hold_reason == "prerequisite"
    with DBSession(ctx.engine) as db:
        assert [p.target for p in unsatisfied(db, waiter)] == ["octo/app#12"]
    github_event(ctx, _event("closed", number=12))  # closed: the prerequisite no longer holds anyone
    rows = {s.id: s for s in _sessions(ctx.engine)}
    assert rows[first].source["issue_state"] == "closed" and rows[first].status == "archived"  # and it stopped
    with DBSession(ctx.engine) as db:
        assert unsatisfied(db, waiter) == []
    github_event(ctx, _event("reopened", number=12))
    with DBSession(ctx.engine) as db:
        assert unsatisfied(db, waiter) == []  # the close stopped #12's session: canceled, it satisfies still


def test_a_template_that_cannot_render_starts_nothing_and_says_why(
    ctx: Any, clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _trigger(ctx.engine, clock.now(), name="broken", kind="github_issue", prompt_template="{{ no_such_thing }}")
    caplog.set_level("WARNING", logger="pacer.intake")
    assert github_event(ctx, _event()) == []
    assert _sessions(ctx.engine) == []
    assert "prompt_template cannot render" in caplog.text


def test_a_prompt_over_the_limit_is_cut_to_it(ctx: Any, clock: Any) -> None:
    _trigger(ctx.engine, clock.now(), name="a", kind="github_issue", prompt_template="{{ body }}")
    github_event(ctx, _event(body="y" * 500), settings=IntakeSettings(max_prompt_chars=100))
    assert _sessions(ctx.engine)[0].prompt == "y" * 100


def test_a_label_trigger_fires_on_issues_and_pull_requests(ctx: Any, clock: Any) -> None:
    _trigger(ctx.engine, clock.now(), name="label", kind="github_label", prompt_template="{{ url }}")
    github_event(ctx, _event("labeled", label="pacer", number=1))
    github_event(ctx, _event("labeled", label="pacer", number=2, event="pull_request"))
    github_event(ctx, _event("labeled", label="docs", number=3))
    rows = _sessions(ctx.engine)
    assert [(s.source["number"], s.source["is_pull_request"], s.prompt) for s in rows] == [
        (1, False, "https://github.com/octo/app/issues/1"),
        (2, True, "https://github.com/octo/app/pull/2"),
    ]
    assert all(s.genesis == "github_label" for s in rows)


def test_pacer_priority_makes_the_waiting_session_priority_and_starts_it(ctx: Any, clock: Any) -> None:
    _trigger(ctx.engine, clock.now(), name="a", kind="github_issue", prompt_template="{{ title }}")
    github_event(ctx, _event(number=1, repository="octo/other"))  # takes the only slot
    (held,) = github_event(ctx, _event(number=2))
    assert _sessions(ctx.engine)[1].status == "waiting"
    github_event(ctx, _event("labeled", number=2, label="pacer:priority", sender="carol"))
    row = _sessions(ctx.engine)[1]
    assert row.id == held and row.scheduling_class == "priority"
    assert row.status == "running"  # a priority start takes a slot (StartNow after the commit)


def test_pacer_hold_places_an_operator_hold_and_removing_it_releases(ctx: Any, clock: Any) -> None:
    _trigger(ctx.engine, clock.now(), name="a", kind="github_issue", prompt_template="{{ title }}")
    (session_id,) = github_event(ctx, _event())
    github_event(ctx, _event("labeled", label="pacer:hold", sender="carol"))
    github_event(ctx, _event("labeled", label="pacer:hold", sender="carol"))  # a redelivery: still one hold
    with DBSession(ctx.engine) as db:
        holds = list(db.exec(select(OperatorHold)).all())
    assert [(h.selector_kind, h.selector_value, h.armer, h.released_at) for h in holds] == [
        ("session", str(session_id), "github:carol", None)
    ]
    assert "pacer:hold" in holds[0].reason and "octo/app#7" in holds[0].reason
    (new,) = github_event(ctx, _event(number=8))  # the only slot is taken; the held one must not jump it
    assert _sessions(ctx.engine)[1].id == new
    github_event(ctx, _event("unlabeled", label="pacer:hold", sender="dave"))
    with DBSession(ctx.engine) as db:
        (hold,) = db.exec(select(OperatorHold)).all()
    assert hold.released_at == clock.now() and hold.released_by == "github:dave"


def test_a_person_placed_hold_is_not_released_by_the_label(ctx: Any, clock: Any) -> None:
    _trigger(ctx.engine, clock.now(), name="a", kind="github_issue", prompt_template="{{ title }}")
    (session_id,) = github_event(ctx, _event())
    with session_scope(ctx.engine) as db:
        db.add(
            OperatorHold(selector_kind="session", selector_value=str(session_id), armer="U0OPS", created_at=clock.now())
        )
    github_event(ctx, _event("unlabeled", label="pacer:hold", sender="carol"))
    with DBSession(ctx.engine) as db:
        assert db.exec(select(OperatorHold)).one().released_at is None


def test_a_hold_label_already_on_a_new_issue_holds_its_session_from_its_first_ask(ctx: Any, clock: Any) -> None:
    _trigger(ctx.engine, clock.now(), name="a", kind="github_issue", prompt_template="{{ title }}")
    (session_id,) = github_event(ctx, _event(labels=("pacer:hold", "pacer:priority")))
    with DBSession(ctx.engine) as db:
        assert db.exec(select(OperatorHold.selector_value)).one() == str(session_id)
    row = _sessions(ctx.engine)[0]
    assert row.scheduling_class == "priority"
    assert (row.status, row.hold_reason) == ("waiting", "operator_hold")  # priority, yet held: the slot is free


def test_closing_the_issue_stops_its_session_running_or_waiting(ctx: Any, clock: Any) -> None:
    _trigger(ctx.engine, clock.now(), name="a", kind="github_issue", prompt_template="{{ title }}")
    (running,) = github_event(ctx, _event(number=1))
    (waiting,) = github_event(ctx, _event(number=2))
    github_event(ctx, _event("closed", number=1, sender="carol"))
    github_event(ctx, _event("closed", number=2, sender="carol"))
    rows = {s.id: s for s in _sessions(ctx.engine)}
    assert {i: s.status for i, s in rows.items()} == {running: "archived", waiting: "archived"}
    assert [rows[i].source["stopped"]["halted"] for i in (running, waiting)] == [True, False]
    assert rows[running].source["stopped"] == {"by": "github:carol", "why": "closed", "label": None, "halted": True}


def test_closing_the_pull_request_pacer_opened_or_removing_the_label_stops_the_session(ctx: Any, clock: Any) -> None:
    _trigger(ctx.engine, clock.now(), name="label", kind="github_label", prompt_template="{{ title }}",
             config={"label": "agent"})
    (by_pull,) = github_event(ctx, _event("labeled", number=1, label="agent"))
    (by_label,) = github_event(ctx, _event("labeled", number=2, label="agent"))
    with session_scope(ctx.engine) as db:  # the pull request its first turn opened, as the workspace records it
        row = db.get(Session, by_pull)
        assert row is not None
        row.source = {**row.source, "workspace": {"branch": "pacer/1-x", "pull_request": {"number": 40}}}
        db.add(row)
    github_event(ctx, _event("unlabeled", number=2, label="bug"))  # not its trigger's label: nothing
    github_event(ctx, _event("closed", number=41, event="pull_request"))  # another pull request: nothing
    assert [s.status for s in _sessions(ctx.engine)] == ["running", "waiting"]
    github_event(ctx, _event("closed", number=40, event="pull_request", sender="carol"))
    github_event(ctx, _event("unlabeled", number=2, label="AGENT", sender="dan"))
    rows = {s.id: s for s in _sessions(ctx.engine)}
    assert [rows[i].status for i in (by_pull, by_label)] == ["archived", "archived"]
    assert rows[by_pull].source["stopped"] == {"by": "github:carol", "why": "closed", "label": None, "halted": True}
    assert rows[by_label].source["stopped"] == {"by": "github:dan", "why": "unlabeled", "label": "AGENT",
                                                "halted": False}


def test_controls_from_people_without_write_access_are_ignored(ctx: Any, clock: Any) -> None:
    _trigger(ctx.engine, clock.now(), name="a", kind="github_issue", prompt_template="{{ title }}")
    github_event(ctx, _event(number=1))
    github_event(ctx, _event(number=2))
    # The author of a stranger's issue labels it themselves: judged by their own association.
    stranger = _event("labeled", number=2, label="pacer:priority", author="alice", association="NONE")
    with session_scope(ctx.engine) as db:
        plan = record_github(db, stranger, now=clock.now(), settings=IntakeSettings())
    assert plan.is_empty
    assert _sessions(ctx.engine)[1].scheduling_class is None


def test_a_control_with_no_session_for_the_issue_changes_nothing(ctx: Any, clock: Any) -> None:
    with session_scope(ctx.engine) as db:
        plan = record_github(
            db, _event("labeled", label="pacer:priority", sender="carol"), now=clock.now(), settings=IntakeSettings()
        )
    assert plan.is_empty and plan.actor == "github:carol"
    assert _event("closed").kind is Kind.CONTROL


@pytest.mark.parametrize(
    "trigger_fields, request_fields",
    [
        ({}, {}),
        ({"scheduling_class": "priority"}, {}),
        ({"scheduling_class": "spot", "precedence": 7, "concurrency_group": "team-a"}, {}),
        ({"precedence": -3}, {"scheduling_class": "priority", "concurrency_group": "repo:octo/app"}),
        ({}, {"precedence": 12, "weight": 0.5, "capacity": 2, "runtime": "claude"}),
    ],
)
def test_the_intake_insert_writes_the_row_create_session_writes(
    any_engine: Engine, clock: Any, trigger_fields: dict[str, Any], request_fields: dict[str, Any]
) -> None:
    """The webhook writes its sessions with one Core INSERT (`insert_session`), not through the
    ORM's create_session: the two must not drift apart, column for column."""
    from scheduler.store.sessions import NewSession, create_session, insert_session

    now = clock.now()
    trigger_id = _trigger(any_engine, now, name="t", kind="github_label", **trigger_fields)
    request = NewSession(
        title="octo/app#1 Fix it",
        genesis="github_label",
        trigger_id=trigger_id,
        requester="github:alice",
        source={"kind": "github", "issue_key": "octo/app#1"},
        **request_fields,
    )
    with session_scope(any_engine) as db:
        trigger = db.get(Trigger, trigger_id)
        assert trigger is not None
        fast_id = insert_session(db, request, now=now, prompt="Fix it", trigger=trigger)
        orm = create_session(db, request, now=now)
        orm.prompt = "Fix it"
        db.add(orm)
        orm_id = orm.id
    with DBSession(any_engine) as db:
        fast, slow = db.get(Session, fast_id), db.get(Session, orm_id)
        assert fast is not None and slow is not None
        assert fast.model_dump(exclude={"id"}) == slow.model_dump(exclude={"id"})
