"""After a turn: the session's new commits go to its branch on the remote, and its one draft pull
request is opened or updated. Each commit goes out with Pacer's trailers (the session, where to
read about it, who asked: `integrations.trailers`), and the pull request's body says what the
turns so far cost and how long they ran. Nothing is pushed when the turn made no commit; a push
the remote rejects (the branch moved under it) is recorded with git's words and shown, never
forced and never retried blindly.

    publish = Publisher(spaces, PyGithubPulls(clients))
    record = publish(work, space, result)   # {"branch", "pushed", "head", "pull_request", "push_error"}
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from integrations.github.pulls import PeoplePort, PullRequestAsk, PullRequestPort
from integrations.runners.workspace import Credentials, SessionWork, token_for
from integrations.trailers import CommitTrailers, trailers_of
from integrations.workspaces import Workspace, WorkspaceError, Workspaces
from scheduler.ports import TurnResult
from templates import render

log = logging.getLogger("pacer.github")

BODY_CHARS = 60_000  # GitHub takes 65,536 characters in a pull request's body; the rest is the frame
TITLE_CHARS = 250


class Publisher:
    """`WorkspaceRunner`'s publish step, over the workspaces and a pull request port."""

    def __init__(
        self, spaces: Workspaces, pulls: PullRequestPort | None, *, credentials: Credentials | None = None,
        people: PeoplePort | None = None,
    ) -> None:
        self.spaces = spaces
        self.pulls = pulls
        self.credentials = credentials
        self.people = people
        self.trailers = CommitTrailers(spaces)

    def __call__(self, work: SessionWork, space: Workspace, result: TurnResult) -> Mapping[str, Any]:
        self.spaces.collect(space)
        commits = self.trailers.pending(space)
        if commits == 0:
            return {"pushed": 0, "push_error": None}
        outgoing = self.trailers.sign(space, trailers_of(work.session_id, work.link, self._coauthor(work)))
        try:
            self.spaces.push(space, token=token_for(self.credentials, work), ref=outgoing.ref)
        except WorkspaceError as exc:
            log.warning("session #%s: the push of %s was rejected: %s", work.session_id, space.branch, exc)
            return {"pushed": 0, "push_error": str(exc)}
        self.trailers.pushed(space, outgoing)
        log.info("session #%s: pushed %d commits to %s of %s", work.session_id, commits, space.branch, work.repository)
        # The commit the branch now ends at: a failed check on any other is an older push's (bot.github.fixes).
        record: dict[str, Any] = {"pushed": commits, "push_error": None, "head": outgoing.tip}
        if self.pulls is not None:
            ask = pull_request_ask(work, space, result)
            ref = self.pulls.open_or_update(ask)
            record["pull_request"] = {"number": ref.number, "url": ref.url}
            log.info(
                "session #%s: pull request #%s %s", work.session_id, ref.number, "opened" if ref.created else "updated"
            )
        return record

    def _coauthor(self, work: SessionWork) -> str | None:
        """The person who asked, when they are a GitHub account (not a bot) and GitHub says who."""
        login = (work.requester or "").removeprefix("github:")
        if self.people is None or not work.requester or not work.requester.startswith("github:"):
            return None
        if not login or login.lower().endswith("[bot]"):
            return None
        return self.people.coauthor(login, work.installation_id)


def pull_request_ask(work: SessionWork, space: Workspace, result: TurnResult) -> PullRequestAsk:
    """The draft pull request a session's branch becomes: titled from the session, its body the
    issue it refers to, what its turns cost and how long they ran, and the turn's result (cut to
    fit, and saying so)."""
    output = result.output or ""
    shown = output[:BODY_CHARS]
    spent = {  # this turn's result is not a finished turn's row yet: counted here
        "turns": work.turns + 1,
        "cost_usd": work.cost_usd + result.cost_usd,
        "seconds": (work.duration_ms + result.duration_ms) / 1000,
    }
    body = render("github/pull_request.j2", work=work, space=space, result=result, output=shown,
                  cut=len(output) - len(shown), spent=spent)
    title = work.title.strip()[:TITLE_CHARS] or space.branch
    return PullRequestAsk(
        work.repository, space.branch, title, body, base=work.base, installation_id=work.installation_id
    )
