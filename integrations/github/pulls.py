"""Pull requests: a session's branch becomes one draft pull request, opened once and updated by
later turns, through PyGithub (GITHUB_API_URL, so GitHub Enterprise and the tests' stand-in too).

    pulls = PyGithubPulls(clients)
    ref = pulls.open_or_update(PullRequestAsk("acme/api", "pacer/42-fix-login", "Fix login", body))

GitHub allows one open pull request per head branch, so the branch is the key: a pull request
already open from it is edited, never a second one made. That also makes a create that failed
after GitHub acted safe to ask again.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Protocol

from integrations.github.client import GithubClients

log = logging.getLogger("pacer.github")


@dataclass(frozen=True)
class PullRequestAsk:
    repository: str  # owner/name
    head: str  # the session's branch
    title: str
    body: str
    base: str | None = None  # None: the repository's default branch
    installation_id: int | None = None


@dataclass(frozen=True)
class PullRequestRef:
    number: int
    url: str  # the page a person opens
    created: bool


class PullRequestPort(Protocol):
    def open_or_update(self, ask: PullRequestAsk) -> PullRequestRef: ...


class PyGithubPulls:
    """`PullRequestPort` over PyGithub."""

    def __init__(self, clients: GithubClients) -> None:
        self.clients = clients

    def open_or_update(self, ask: PullRequestAsk) -> PullRequestRef:
        repo = self.clients.client(ask.installation_id).get_repo(ask.repository)
        owner = ask.repository.split("/")[0]
        for pull in repo.get_pulls(state="open", head=f"{owner}:{ask.head}"):
            if pull.title != ask.title or pull.body != ask.body:
                pull.edit(title=ask.title, body=ask.body)
            return PullRequestRef(int(pull.number), str(pull.html_url), created=False)
        base = ask.base or str(repo.default_branch)
        pull = repo.create_pull(base=base, head=ask.head, title=ask.title, body=ask.body, draft=True)
        return PullRequestRef(int(pull.number), str(pull.html_url), created=True)


class PeoplePort(Protocol):
    def coauthor(self, login: str, installation_id: int | None) -> str | None: ...


class PyGithubPeople:
    """A GitHub login as a `Co-authored-by` names it: `login <id+login@users.noreply.github.com>`,
    the address GitHub credits to the account whatever its own e-mail settings. Read once per login
    (GET /users/<login>); None, and a log line, when GitHub cannot say."""

    def __init__(self, clients: GithubClients) -> None:
        self.clients = clients
        self._known: dict[str, str] = {}
        self._lock = threading.Lock()

    def coauthor(self, login: str, installation_id: int | None) -> str | None:
        with self._lock:
            if login.lower() in self._known:
                return self._known[login.lower()]
        try:
            user = self.clients.client(installation_id).get_user(login)
            found = f"{user.login} <{int(user.id)}+{user.login}@users.noreply.github.com>"
        except Exception as exc:  # a co-author is a courtesy: the commit goes out without one
            log.info("github: %s is not named a co-author: GitHub did not say who it is (%s)", login, exc)
            return None
        with self._lock:
            self._known[login.lower()] = found
        return found
