"""The labels Pacer reads on a repository, made there when its GitHub App is installed, so nobody
has to create `pacer:priority` and `pacer:hold` by hand before they work.

    made = PyGithubLabels(clients).ensure("acme/api", 42, [Label("pacer:hold", "fbca04", "...")])

A label the repository has already (any case: GitHub's names are case-insensitive) is left as
its owners made it, colour and description included. Asking twice is harmless, which is what lets
a redelivered installation event be acted on again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from integrations.github.client import GithubClients

# GitHub answers 422 to a create whose name exists: someone made it since the list was read.
ALREADY_EXISTS = 422


@dataclass(frozen=True)
class Label:
    name: str
    color: str  # six hex digits, no '#'
    description: str


class LabelPort(Protocol):
    def ensure(self, repository: str, installation_id: int | None, labels: Sequence[Label]) -> list[str]: ...


class PyGithubLabels:
    """`LabelPort` over PyGithub."""

    def __init__(self, clients: GithubClients) -> None:
        self.clients = clients

    def ensure(self, repository: str, installation_id: int | None, labels: Sequence[Label]) -> list[str]:
        """Create each of `labels` the repository lacks; the names of those made."""
        from github import GithubException

        repo = self.clients.client(installation_id).get_repo(repository)
        present = {str(label.name).lower() for label in repo.get_labels()}
        made: list[str] = []
        for label in labels:
            if label.name.lower() in present:
                continue
            try:
                repo.create_label(label.name, label.color, label.description)
            except GithubException as exc:
                if exc.status != ALREADY_EXISTS:
                    raise
                continue
            made.append(label.name)
        return made
