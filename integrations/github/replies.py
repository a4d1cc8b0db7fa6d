"""Answers on GitHub: a new comment on an issue or pull request, for a `/pacer <command>` someone
wrote there. (The session's news goes to the one sticky status comment instead: comments.py.)

    replies = PyGithubReplies(clients)
    replies.reply(Where("acme/api", 7, installation_id), body)   # the new comment's id
"""

from __future__ import annotations

from typing import Protocol

from integrations.github import markers
from integrations.github.client import GithubClients
from integrations.github.status import Where


class ReplyPort(Protocol):
    def reply(self, where: Where, body: str) -> int: ...


class PyGithubReplies:
    """`ReplyPort` over PyGithub. A create is never retried blind (`GithubClients`). Each reply
    begins with Pacer's marker, so its own delivery back is known for Pacer's (`markers`)."""

    def __init__(self, clients: GithubClients) -> None:
        self.clients = clients

    def reply(self, where: Where, body: str) -> int:
        issue = self.clients.client(where.installation_id).get_repo(where.repository).get_issue(where.number)
        return int(issue.create_comment(f"{markers.REPLY}\n{body}").id)
