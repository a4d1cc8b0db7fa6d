"""A pull request's review as GitHub holds it: its state, its body and its comments on lines, read
whole after the delivery (a review's deliveries come one per comment, in no set order, so the
review is read once, from the API, instead of pieced together from them).

    reviews = PyGithubReviews(clients)
    found = reviews.read(Where("acme/api", 12, installation_id), review_id=80)
    found.state, found.body, [(c.path, c.line, c.body) for c in found.comments]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from integrations.github.client import GithubClients
from integrations.github.status import Where

MAX_COMMENTS = 100  # read of one review; a review of more lines is rare, and the prompt says how many were cut


@dataclass(frozen=True)
class ReviewLine:
    path: str
    line: int | None  # None: the line is no longer in the diff
    body: str
    author: str = ""


@dataclass(frozen=True)
class ReviewRead:
    state: str  # changes_requested | commented | approved | dismissed (GitHub's, lower case)
    body: str
    comments: tuple[ReviewLine, ...]


class ReviewPort(Protocol):
    def read(self, where: Where, *, review_id: int) -> ReviewRead: ...


class PyGithubReviews:
    """`ReviewPort` over PyGithub: GET the pull request, its review, and the review's comments."""

    def __init__(self, clients: GithubClients) -> None:
        self.clients = clients

    def read(self, where: Where, *, review_id: int) -> ReviewRead:
        pull = self.clients.client(where.installation_id).get_repo(where.repository).get_pull(where.number)
        review = pull.get_review(review_id)
        lines: list[ReviewLine] = []
        for comment in pull.get_single_review_comments(review_id):
            if len(lines) >= MAX_COMMENTS:
                break
            lines.append(ReviewLine(str(comment.path or ""), _line(comment), str(comment.body or ""),
                                    str(getattr(comment.user, "login", "") or "")))
        return ReviewRead(str(review.state or "").lower(), str(review.body or ""), tuple(lines))


def _line(comment: Any) -> int | None:
    line = comment.line if comment.line is not None else comment.original_line
    return int(line) if isinstance(line, int) else None
