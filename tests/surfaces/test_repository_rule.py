"""One rule for a repository name (`scheduler.bounds.REPOSITORY_PATTERN`), held at every door and
by the workspace, on SQLite and PostgreSQL, through signed deliveries into Pacer's real app and
real API calls:

    the webhook     a name GitHub would not send is answered 200 and nothing is kept, however
                    often it is delivered (never a 500 that GitHub would redeliver for ever)
    the API         422 naming the field, for a session, a trigger's config, a hold's selector
    /pacer          the error and the usage line
    the workspace   takes every name the doors take, and refuses the rest the same way

A name is kept in lower case where it is a key: `ACME/API` and `acme/api` are one repository
(one mirror, one concurrency group); an owner of 39 characters and a name of 100 give each issue
its own session.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic import command
from sqlalchemy import Engine, MetaData, Table, insert, text
from sqlmodel import Session as DBSession
from sqlmodel import col, func, select

from bot.serve.app import create_app
from integrations.workspaces import GitRemote, WorkspaceError, Workspaces
from scheduler import bounds
from scheduler.errors import InvalidInput
from scheduler.store.db import alembic_config, make_engine, session_scope
from scheduler.store.models import OperatorHold, Session, Trigger, WebhookDelivery
from tests.support.api_client import make_api
from tests.support.github_support import headers, issue_payload, make_pacer, serving

# Each breaks one clause: a path out of the mirrors, an owner GitHub would not give, a name
# ending in .git, a length past GitHub's, not owner/name at all.
REFUSED = ["-u/x", "../..", "a/..", "a/.", ".git/x", "_x/y", "a_b/x", "a.b/x", "a/.git", "a/x.git", "a/X.GIT", "a--b/x",
           "a-/x", "a" * 40 + "/x", "a/" + "b" * 101, "a/b/c", "a", "a/", "/a", "a/b\n", "a /b", "a/b c", "é/x"]
TAKEN = ["acme/api", "ACME/API", "a/.hidden", "acme/.github", "a-b/c_d.e", "a/b..c", "a/b.", "a/-x", "a/x.gitx",
         "o" * 39 + "/" + "n" * 100]


@pytest.mark.parametrize("name", TAKEN)
def test_a_repository_by_githubs_rules_is_taken_in_lower_case(name: str) -> None:
    assert bounds.is_repository(name)
    assert bounds.check_repository(name) == name.lower()


@pytest.mark.parametrize("name", REFUSED)
def test_every_other_name_is_refused_naming_the_field_and_the_rule(name: str) -> None:
    assert not bounds.is_repository(name)
    with pytest.raises(InvalidInput) as refused:
        bounds.check_repository(name, "repository")
    assert refused.value.field == "repository"
    assert "the owner 1 to 39 letters and digits with single hyphens between them" in str(refused.value)
    assert "not '.' or '..' nor ending in '.git'" in str(refused.value)


# --------------------------------------------------------------------------- the webhook


class Hook:
    def __init__(self, client: httpx.Client, engine: Engine, edge: Any) -> None:
        self.client, self.engine, self.edge = client, engine, edge

    def send(self, payload: dict[str, Any], *, delivery: str | None = None) -> httpx.Response:
        body = json.dumps(payload).encode()
        response = self.client.post("/github/webhook", content=body, headers=headers("issues", body, delivery=delivery))
        assert self.edge.drain(10)
        return response

    def sessions(self) -> list[Session]:
        with DBSession(self.engine) as db:
            return list(db.exec(select(Session).order_by(col(Session.id))))

    def deliveries(self) -> int:
        with DBSession(self.engine) as db:
            return int(db.exec(select(func.count()).select_from(WebhookDelivery)).one())


@pytest.fixture
def hook(any_engine: Engine, clock: Any, deferrer: Any) -> Iterator[Hook]:
    pacer = make_pacer(any_engine, clock, deferrer)
    with session_scope(any_engine) as db:
        db.add(
            Trigger(
                name="issues",
                kind="github_issue",
                prompt_template="Fix {{ repository }}#{{ number }}",
                created_at=clock.now(),
            )
        )
    app = create_app(pacer, start_scheduler=False)
    with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield Hook(client, any_engine, app.state.github)


@pytest.mark.parametrize("name", ["-u/x", "../..", "a/..", ".git/x", "_x/y", "a/.git", "a/x.git", "a" * 40 + "/x"])
def test_a_delivery_naming_a_repository_github_would_not_send_is_200_and_keeps_nothing(hook: Hook, name: str) -> None:
    for _ in range(3):  # GitHub's redeliveries of it: the same answer, never a 500
        answer = hook.send(issue_payload(repository=name), delivery="one-delivery")
        assert answer.status_code == 200, answer.text
        assert answer.json()["message"].startswith("Ignored:") and "repository name" in answer.json()["message"]
    assert hook.sessions() == [] and hook.deliveries() == 0


def test_both_spellings_of_a_repository_are_one_repository(hook: Hook, tmp_path: Path) -> None:
    assert hook.send(issue_payload(repository="ACME/API", number=1)).status_code == 202
    assert hook.send(issue_payload(repository="acme/api", number=2)).status_code == 202
    assert (
        hook.send(issue_payload(repository="Acme/Api", number=1)).json()["sessions"] == []
    )  # issue 1 again: already taken
    rows = hook.sessions()
    assert [(s.repository, s.concurrency_group) for s in rows] == [("acme/api", "repo:acme/api")] * 2
    assert [s.title.split()[0] for s in rows] == [
        "ACME/API#1",
        "acme/api#2",
    ]  # as GitHub spells it, where a person reads it
    spaces = Workspaces(tmp_path, GitRemote())
    assert len({spaces.mirror_path(str(s.repository)) for s in rows}) == 1


def test_a_repository_of_the_longest_names_gives_each_issue_its_session(hook: Hook) -> None:
    name = "o" * 39 + "/" + "n" * 100
    for number in (2, 3, 4, bounds.MAX_ID):
        assert hook.send(issue_payload(repository=name, number=number)).status_code == 202
    assert [s.source["number"] for s in hook.sessions()] == [2, 3, 4, bounds.MAX_ID]


# --------------------------------------------------------------------------- the API and /pacer


@pytest.fixture
def api(any_engine: Engine, clock: Any) -> Iterator[Any]:
    api = make_api(any_engine, clock)
    yield api
    api.close()


def _count(engine: Engine, model: Any) -> int:
    with DBSession(engine) as db:
        return int(db.exec(select(func.count()).select_from(model)).one())


@pytest.mark.parametrize("name", ["-u/x", "../..", "a/..", ".git/x", "_x/y", "a/.git", "a/x.git", "a" * 40 + "/x"])
def test_the_api_refuses_a_name_past_the_rule_with_a_422_naming_the_field(
    api: Any, any_engine: Engine, name: str
) -> None:
    session = api.post("/sessions", {"prompt": "do it", "repository": name})
    assert session.status_code == 422 and session.json()["field"] == "repository", session.text
    repositories = api.post("/triggers", {"name": "t", "kind": "github_issue", "prompt_template": "{{ title }}",
                                          "config": {"repositories": ["acme/api", name]}})
    assert repositories.status_code == 422 and repositories.json()["field"] == "config.repositories", repositories.text
    repository = api.post("/triggers", {"name": "t", "kind": "slack", "prompt_template": "{{ text }}",
                                        "config": {"channels": ["C1"], "repository": name}})
    assert repository.status_code == 422 and repository.json()["field"] == "config.repository", repository.text
    hold = api.post("/holds", {"selector": f"repo:{name}"}, actor="alice")
    assert hold.status_code == 422 and hold.json()["field"] == "selector", hold.text
    assert (_count(any_engine, Session), _count(any_engine, Trigger), _count(any_engine, OperatorHold)) == (0, 0, 0)


@pytest.mark.parametrize(
    "line", ["new repo:_x/y fix it", "new repo:a/.git fix it", "hold repo:-u/x", "hold repo:a/x.git"]
)
def test_pacer_commands_refuse_it_with_the_rule(api: Any, any_engine: Engine, line: str) -> None:
    answer = api.post("/chat", {"text": line}, actor="alice")
    assert answer.status_code == 200 and not answer.json()["ok"], answer.text
    assert "is not a repository; use owner/name" in answer.json()["text"] and "usage:" in answer.json()["text"]
    assert (_count(any_engine, Session), _count(any_engine, OperatorHold)) == (0, 0)


def test_the_api_and_pacer_keep_a_repository_in_lower_case(api: Any, any_engine: Engine) -> None:
    created = api.post("/sessions", {"prompt": "do it", "repository": "ACME/API"})
    assert created.status_code == 201, created.text
    assert api.post("/chat", {"text": "new repo:Acme/Api fix it"}, actor="alice").json()["ok"]
    hold = api.post("/holds", {"selector": "repo:ACME/.github"}, actor="alice")
    assert hold.status_code == 201, hold.text
    with DBSession(any_engine) as db:
        assert [s.repository for s in db.exec(select(Session))] == ["acme/api", "acme/api"]
        assert db.exec(select(OperatorHold.selector_value)).one() == "acme/.github"


# --------------------------------------------------------------------------- the workspace


def test_the_workspace_takes_what_the_doors_take_and_refuses_the_rest(tmp_path: Path) -> None:
    # A remote that is not there: a name the workspace takes gets as far as git's clone.
    spaces = Workspaces(tmp_path / "spaces", GitRemote(f"file://{tmp_path}/absent/{{repository}}"))
    for name in TAKEN:
        with pytest.raises(WorkspaceError) as cloned:
            spaces.sync(name)
        assert "git clone failed" in str(cloned.value), name
    for name in REFUSED:
        with pytest.raises(WorkspaceError) as refused:
            spaces.sync(name)
        assert "is not owner/name" in str(refused.value), name
    assert not (tmp_path / "spaces" / "mirrors").exists() or all(
        p.is_relative_to(tmp_path / "spaces") for p in (tmp_path / "spaces").rglob("*")
    )


# --------------------------------------------------------------------------- rows written before


def test_the_migration_puts_the_rows_written_before_in_lower_case(tmp_path: Path, clock: Any) -> None:
    url = f"sqlite:///{tmp_path}/pacer.db"
    command.upgrade(alembic_config(url), "0015")
    engine = make_engine(url)
    # The rows as that schema held them: today's model fills each column, and only the columns the
    # table had at 0015 are written (a column added since, e.g. fix_attempts, is not there yet).
    then = Table("sessions", MetaData(), autoload_with=engine)
    with engine.begin() as conn:
        for group, repo in (("repo:ACME/API", "ACME/API"), ("team-A", "Acme/Web"), (None, None)):
            row = Session(title="t", genesis="api", concurrency_group=group, repository=repo,
                          created_at=clock.now(), updated_at=clock.now())
            values = {c.name: getattr(row, c.name) for c in Session.__table__.columns if c.name in then.columns}
            conn.execute(insert(Session.__table__).values({k: v for k, v in values.items() if k != "id"}))
    command.upgrade(alembic_config(url), "head")
    with engine.begin() as conn:
        found = conn.execute(text("SELECT concurrency_group, repository FROM sessions ORDER BY id")).all()
    engine.dispose()
    assert [tuple(r) for r in found] == [("repo:acme/api", "acme/api"), ("team-A", "acme/web"), (None, None)]


def test_a_hold_on_a_repository_holds_its_sessions_whichever_door_named_it_and_however_spelled(
    api: Any, any_engine: Engine
) -> None:
    assert api.post("/holds", {"selector": "repo:ACME/API"}, actor="alice").status_code == 201
    held = api.post("/sessions", {"prompt": "do it", "repository": "Acme/Api"}, actor="alice")
    other = api.post("/sessions", {"prompt": "do it", "repository": "acme/web"}, actor="alice")
    assert held.status_code == other.status_code == 201, (held.text, other.text)
    assert held.json()["submission"]["reason"] == "operator_hold", held.text
    assert other.json()["submission"]["outcome"] == "started", other.text
