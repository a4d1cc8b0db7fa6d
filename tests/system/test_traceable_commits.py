"""Traceable commits and pull requests (issue 31, P19 item 6), end to end as the work loop runs: each
commit Pacer pushes names its session, links its status comment and credits who asked; the pull
request's body says what the turns cost and how long they ran."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine

from bot.serve.app import create_app
from tests.integrations.test_workspaces import bare_remote, git
from tests.support.github_support import FakeGithub, comment_payload, headers, issue_payload, serving
from tests.system.test_work_loop import BRANCH, _pacer, _wait, comment_text


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return bare_remote(tmp_path)


def test_each_pushed_commit_names_its_session_and_the_pull_request_its_cost(
    engine: Engine, room: Path, github: FakeGithub, remote: Path
) -> None:
    app = create_app(_pacer(engine, room, github, remote), start_scheduler=False)
    with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        for event, payload in (
            ("issues", issue_payload("labeled", label="pacer", repository="acme/api", number=7,
                                     title="Record every turn", author="alice", association="MEMBER")),
            ("issue_comment", comment_payload("bob: also log it", repository="acme/api", number=7, commenter="bob",
                                              association="COLLABORATOR")),
        ):
            body = json.dumps(payload).encode()
            assert client.post("/github/webhook", content=body, headers=headers(event, body)).status_code == 202
            turn = 1 if event == "issues" else 2
            _wait(f"turn {turn}'s result", lambda turn=turn: f"Turn {turn} done" in comment_text(github))
    (status_id,) = github.comments
    link = f"https://github.com/acme/api/issues/7#issuecomment-{status_id}"
    coauthor = f"alice <{1000 + sum(map(ord, 'alice'))}+alice@users.noreply.github.com>"
    bare = str(remote / "acme" / "api.git")
    messages = [m.strip() for m in git("--git-dir", bare, "log", "--format=%B%x00", BRANCH).split("\x00") if m.strip()]
    assert [m.splitlines()[0] for m in messages] == ["Record turn 2", "Record turn 1", "first"]
    for message in messages[:2]:
        trailers = message.split("\n\n")[-1].splitlines()
        assert trailers[0] == "Pacer-Session: 1" and trailers[-1] == f"Co-authored-by: {coauthor}", message
        assert trailers[1].startswith("Pacer-Link: https://github.com/acme/api/issues/7"), message
    assert f"Pacer-Link: {link}" in messages[0]  # by the second turn the status comment is there
    # Each turn's commit went on top of the last pushed one: the agent's parent, rewritten.
    assert git("--git-dir", bare, "rev-list", "--count", BRANCH).strip() == "3"
    (pull,) = github.pulls.values()
    assert f"works on `{BRANCH}` ([its status]({link})). Its 2 turns so far cost $0.84 and ran 122.0 s." in pull["body"]
