"""After a turn: the session's new commits go to its branch on the remote, and its one draft pull
request is opened or updated. Nothing is pushed when the turn made no commit; a push the remote
rejects (the branch moved under it) is recorded with git's words and shown, never forced and
never retried blindly.

    publish = Publisher(spaces, PyGithubPulls(clients))
    record = publish(work, space, result)   # {"branch", "pushed", "pull_request", "push_error"}
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from integrations.github.pulls import PullRequestAsk, PullRequestPort
from integrations.runners.workspace import Credentials, SessionWork, token_for
from integrations.workspaces import Workspace, WorkspaceError, Workspaces
from scheduler.ports import TurnResult
from templates import render

log = logging.getLogger("pacer.github")

BODY_CHARS = 60_000  # GitHub takes 65,536 characters in a pull request's body; the rest is the frame
TITLE_CHARS = 250


class Publisher:
    """`WorkspaceRunner`'s publish step, over the workspaces and a pull request port."""

    def __init__(
        self, spaces: Workspaces, pulls: PullRequestPort | None, *, credentials: Credentials | None = None
    ) -> None:
        self.spaces = spaces
        self.pulls = pulls
        self.credentials = credentials

    def __call__(self, work: SessionWork, space: Workspace, result: TurnResult) -> Mapping[str, Any]:
        commits = self.spaces.new_commits(space)
        if commits == 0:
            return {"pushed": 0, "push_error": None}
        try:
            self.spaces.push(space, token=token_for(self.credentials, work))
        except WorkspaceError as exc:
            log.warning("session #%s: the push of %s was rejected: %s", work.session_id, space.branch, exc)
            return {"pushed": 0, "push_error": str(exc)}
        log.info("session #%s: pushed %d commits to %s of %s", work.session_id, commits, space.branch, work.repository)
        record: dict[str, Any] = {"pushed": commits, "push_error": None}
        if self.pulls is not None:
            ask = pull_request_ask(work, space, result)
            ref = self.pulls.open_or_update(ask)
            record["pull_request"] = {"number": ref.number, "url": ref.url}
            log.info(
                "session #%s: pull request #%s %s", work.session_id, ref.number, "opened" if ref.created else "updated"
            )
        return record


def pull_request_ask(work: SessionWork, space: Workspace, result: TurnResult) -> PullRequestAsk:
    """The draft pull request a session's branch becomes: titled from the session, its body the
    issue it refers to and the turn's result (cut to fit, and saying so)."""
    output = result.output or ""
    shown = output[:BODY_CHARS]
    body = render("github/pull_request.j2", work=work, space=space, result=result, output=shown,
                  cut=len(output) - len(shown))
    title = work.title.strip()[:TITLE_CHARS] or space.branch
    return PullRequestAsk(
        work.repository, space.branch, title, body, base=work.base, installation_id=work.installation_id
    )
