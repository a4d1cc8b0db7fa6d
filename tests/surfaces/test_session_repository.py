"""A session's repository: taken from a GitHub event, a trigger's config, `/pacer new repo:…` or
the API's field; a bad value is refused naming the argument and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.chat import answers
from bot.commands import USAGE
from bot.config.settings import load
from bot.github.events import IntakeEvent, parse
from bot.github.intake import github_event
from bot.runtime.process import Pacer
from bot.triggers.kind_config import check_config
from scheduler import bounds
from scheduler.errors import InvalidInput
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Trigger
from scheduler.store.sessions import NewSession, create_session
from tests.support import harness
from tests.support.api_client import make_api
from tests.support.github_support import issue_payload

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _rows(engine: Any) -> list[Session]:
    with DBSession(engine) as db:
        return list(db.exec(select(Session).order_by(col(Session.id))).all())


@pytest.mark.parametrize("value", ["acme/api", "Octo-Org/my_repo.js", "acme/.github", "a/b", "acme/a..b", "acme/api."])
def test_owner_name_is_a_repository_in_lower_case(value: str) -> None:
    assert bounds.check_repository(value) == value.lower()


@pytest.mark.parametrize(
    "value",
    [
        "acme",
        "acme/api/extra",
        "../etc",
        "acme/..",
        "-x/api",
        "acme/",
        "/api",
        "acme/api.git",
        "acme /api",
        "acme/ api",
        "acme/api\n",
        "",
        42,
        None,
        "a" * 40 + "/b",
    ],
)
def test_anything_else_is_refused_naming_the_argument_and_the_form(value: Any) -> None:
    with pytest.raises(InvalidInput) as refused:
        bounds.check_repository(value, "config.repository")
    assert refused.value.field == "config.repository"
    assert str(refused.value).startswith("config.repository: ")
    assert "is not a repository; use owner/name, e.g. acme/api" in str(refused.value)


def test_a_github_session_takes_the_repository_of_its_event(any_engine: Any, clock: Any) -> None:
    ctx, _deferrer, _workers, _quota = harness.build(any_engine, clock, max_sessions=1, wired=True)
    with session_scope(any_engine) as db:
        db.add(Trigger(name="label", kind="github_label", prompt_template="{{ text }}", created_at=clock.now()))
    event = parse("issues", issue_payload("labeled", label="pacer", repository="Octo/App"), bot_login="pacer[bot]")
    assert isinstance(event, IntakeEvent)
    (session_id,) = github_event(ctx, event)
    assert [(s.id, s.repository) for s in _rows(any_engine)] == [(session_id, "octo/app")]


def test_a_trigger_carries_a_repository_its_sessions_work_in(engine: Any, clock: Any) -> None:
    config = check_config("slack", {"channels": ["C1"], "repository": "acme/api"})
    assert config == {"channels": ["C1"], "repository": "acme/api"}
    with pytest.raises(InvalidInput) as refused:
        check_config("schedule", {"cron": "0 9 * * *", "repository": "acme"})
    assert refused.value.field == "config.repository"
    with session_scope(engine) as db:
        trigger = Trigger(name="t", kind="slack", prompt_template="{{ text }}", config=config, created_at=clock.now())
        db.add(trigger)
        db.flush()
        from_trigger = create_session(db, NewSession(title="a", trigger_id=trigger.id), now=clock.now())
        own = create_session(db, NewSession(title="b", trigger_id=trigger.id, repository="acme/web"), now=clock.now())
        none = create_session(db, NewSession(title="c"), now=clock.now())
        assert (from_trigger.repository, own.repository, none.repository) == ("acme/api", "acme/web", None)


def test_pacer_new_takes_repo_and_refuses_a_bad_one_changing_nothing(engine: Any, clock: Any) -> None:
    ctx, deferrer, _workers, _quota = harness.build(engine, clock, max_sessions=2)
    pacer = Pacer(
        settings=load({"PACER_ROSTER": "UOP=operator"}, toml_path=None),
        engine=engine,
        clock=clock,
        deferrer=deferrer,
        ctx=ctx,
    )
    reply = answers.answer(pacer, "UOP", "new --spot repo:acme/api fix the flaky login test", surface="console")
    assert reply.ok, reply.text
    (session,) = _rows(engine)
    assert (session.repository, session.prompt) == ("acme/api", "fix the flaky login test")
    bad = answers.answer(pacer, "UOP", "new repo:acme fix it", surface="console")
    assert not bad.ok
    assert bad.text == (
        "error: repo: 'acme' is not a repository; use owner/name, e.g. acme/api: the owner 1 to 39 letters and digits"
        " with single hyphens between them, the name 1 to 100 letters, digits, '.', '-' and '_', not '.' or '..'"
        f" nor ending in '.git'\nusage: {USAGE['new']}"
    )
    assert len(_rows(engine)) == 1


def test_the_api_field_sets_it_and_a_bad_one_is_a_422_naming_it(engine: Any, clock: Any) -> None:
    api = make_api(engine, clock)
    try:
        created = api.post("/sessions", {"prompt": "do the work", "repository": "acme/api"})
        assert created.status_code == 201, created.text
        refused = api.post("/sessions", {"prompt": "do the work", "repository": "acme/api/x"})
        assert refused.status_code == 422, refused.text
        assert "repository" in refused.text and "owner/name" in refused.text
    finally:
        api.close()
    assert [s.repository for s in _rows(engine)] == ["acme/api"]
