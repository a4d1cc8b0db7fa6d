"""CI and review feed the next turn (issue 31, P19 item 4), end to end as the work loop runs: real
git, the agent a stand-in script in custody, signed deliveries POSTed into the real endpoint, the
loopback stand-in for GitHub's REST API.

A failed check on Pacer's branch is the session's next turn, once per failed commit however many
events and redeliveries say so, until PACER_FIX_BUDGET is spent; then one comment on the pull
request and no further turn. A review asking for changes, with two comments on lines, is one
turn holding both with their file and line; the same from someone without write access, nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.serve.app import create_app
from scheduler.store.models import Session, Turn
from tests.integrations.test_workspaces import git
from tests.support.github_support import (
    FakeGithub,
    check_payload,
    headers,
    issue_payload,
    review_comment_payload,
    review_payload,
    serving,
)
from tests.system.test_work_loop import BRANCH, _pacer, _wait, comment_text

SHA = ("1" * 40,)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """acme/api.git on disk, one commit on main (as the work loop's)."""
    seed = tmp_path / "seed"
    seed.mkdir()
    git("init", "-q", "-b", "main", cwd=seed)
    (seed / "README.md").write_text("hello\n")
    git("add", ".", cwd=seed)
    git("commit", "-q", "-m", "first", cwd=seed)
    git("clone", "-q", "--bare", str(seed), str(tmp_path / "remotes" / "acme" / "api.git"))
    return tmp_path / "remotes"


def _post(client: httpx.Client, event: str, payload: dict[str, Any], delivery: str | None = None) -> httpx.Response:
    body = json.dumps(payload).encode()
    return client.post("/github/webhook", content=body, headers=headers(event, body, delivery=delivery))


def _prompts(engine: Engine) -> list[str]:
    with DBSession(engine) as db:
        return [t.prompt for t in db.exec(select(Turn).order_by(col(Turn.id)))]


def _first_turn(client: httpx.Client, github: FakeGithub) -> int:
    payload = issue_payload("labeled", label="pacer", repository="acme/api", number=7, title="Record every turn")
    assert _post(client, "issues", payload).status_code == 202
    _wait("the first turn's pull request", lambda: github.pulls and "Turn 1 done" in comment_text(github))
    (number,) = github.pulls
    return number


def _settled(app: Any, engine: Engine, turns: int) -> None:
    """The webhook's follow-up done, and `turns` turns finished."""
    assert app.state.github.drain(30)
    _wait(f"{turns} finished turns", lambda: len(_finished(engine)) == turns)


def _finished(engine: Engine) -> list[Turn]:
    with DBSession(engine) as db:
        return list(db.exec(select(Turn).where(col(Turn.finished_at).is_not(None))))


def test_a_failed_check_is_the_next_turn_until_the_fix_budget_is_spent(
    engine: Engine, room: Path, github: FakeGithub, remote: Path
) -> None:
    pacer = _pacer(engine, room, github, remote, PACER_FIX_BUDGET="1")
    app = create_app(pacer, start_scheduler=False)
    with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        number = _first_turn(client, github)
        assert number == 100

        # A passing check, and a failure on a branch no session works on: nothing.
        assert _post(client, "check_run", check_payload(conclusion="success")).status_code == 200
        stranger = check_payload(sha=SHA[0], branch="feature/other", pull=None)
        assert _post(client, "check_run", stranger).status_code == 202

        # The failure: one turn, whether GitHub says it once, twice (a redelivery) or through
        # the check suite and the workflow run of the same commit.
        bare = str(remote / "acme" / "api.git")
        first = git("--git-dir", bare, "rev-parse", BRANCH).strip()
        failed = check_payload(sha=first, name="tests (3.12)")
        assert _post(client, "check_run", failed, delivery="ci-1").status_code == 202
        redelivered = _post(client, "check_run", failed, delivery="ci-1")
        assert redelivered.status_code == 200 and "already taken" in redelivered.text
        for event in ("check_suite", "workflow_run"):
            assert _post(client, event, check_payload(event, sha=first.upper())).status_code == 202
        _wait("the fix turn's result", lambda: "Turn 2 done" in comment_text(github))
        _settled(app, engine, 2)
        second = git("--git-dir", bare, "rev-parse", BRANCH).strip()
        assert second != first

        # A late failure of the older push: nothing. The budget (1) is spent: the next failure
        # starts nothing and is said once on the pull request, however many checks fail there.
        assert _post(client, "check_run", check_payload(sha=first, name="slow tests")).status_code == 202
        for name in ("lint", "types"):
            assert _post(client, "check_run", check_payload(sha=second, name=name)).status_code == 202
        assert app.state.github.drain(30)

    prompts = _prompts(engine)
    assert len(prompts) == 2, prompts
    fix = prompts[1]
    assert f'The check "tests (3.12)" failed (failure) on commit {first[:12]}' in fix
    assert "2 tests failed" in fix and "FAILED tests/test_login.py::test_expiry" in fix
    assert "fix attempt 1 of 1" in fix
    on_pull = [c["body"] for c in github.comments.values() if c["issue"] == "acme/api#100"]
    assert len(on_pull) == 1, on_pull
    assert 'The check "lint" failed again' in on_pull[0] and "PACER_FIX_BUDGET" in on_pull[0]
    with DBSession(engine) as db:
        session = db.exec(select(Session)).one()
    assert session.fix_attempts == 1 and session.source["workspace"]["branch"] == BRANCH


def test_a_review_with_line_comments_is_one_turn_and_a_strangers_is_nothing(
    engine: Engine, room: Path, github: FakeGithub, remote: Path
) -> None:
    pacer = _pacer(engine, room, github, remote)
    app = create_app(pacer, start_scheduler=False)
    lines = [("src/login.py", 42, "This should check the expiry."), ("tests/test_login.py", 7, "Add a test for it.")]
    for review_id, reviewer in ((801, "bob"), (802, "eve")):
        github.reviews[review_id] = {
            "repository": "acme/api", "number": 100, "state": "changes_requested", "user": reviewer,
            "body": f"{reviewer}: not yet.", "comments": [{"path": p, "line": n, "body": b} for p, n, b in lines],
        }
    with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        assert _first_turn(client, github) == 100

        # GitHub sends the review and each of its line comments apart, in no set order.
        for event, payload in (
            ("pull_request_review_comment", review_comment_payload(801, path=lines[0][0], line=42, body=lines[0][2])),
            ("pull_request_review", review_payload(801, body="bob: not yet.")),
            ("pull_request_review_comment", review_comment_payload(801, path=lines[1][0], line=7, body=lines[1][2])),
        ):
            assert _post(client, event, payload).status_code == 202
        _wait("the review turn's result", lambda: "Turn 2 done" in comment_text(github))
        _settled(app, engine, 2)

        # The same review from someone without write access; and an approval: nothing.
        for event, payload in (
            ("pull_request_review_comment",
             review_comment_payload(802, path=lines[0][0], line=42, body=lines[0][2], reviewer="eve",
                                    association="CONTRIBUTOR")),
            ("pull_request_review", review_payload(802, body="eve: not yet.", reviewer="eve", association="NONE")),
            ("pull_request_review", review_payload(803, state="approved", body="LGTM")),
        ):
            assert _post(client, event, payload).status_code in (200, 202)
        assert app.state.github.drain(30)

    prompts = _prompts(engine)
    assert len(prompts) == 2, prompts
    review = prompts[1]
    assert review.startswith("bob requested changes on your pull request acme/api#100:")
    assert "bob: not yet." in review and "eve" not in review
    assert "- `src/login.py` line 42: This should check the expiry." in review
    assert "- `tests/test_login.py` line 7: Add a test for it." in review
    # The review was read once, from the API, for all three of its deliveries.
    reads = [c.path for c in github.calls if "/reviews/" in c.path]
    assert reads == ["/repos/acme/api/pulls/100/reviews/801", "/repos/acme/api/pulls/100/reviews/801/comments"]
