"""CI and review on the pull request Pacer opened, as Pacer reads them: a typed `CheckFailed` or
`Reviewed`, `Ignored` with a reason, or None for an event this module does not read.

Pure, like `bot.github.events`: a verified, decoded payload in, a value out; no payload makes it
raise. Routing:

    check_run.completed, check_suite.completed,      CheckFailed, when the conclusion is a failure
    workflow_run.completed                           (failure, timed_out, startup_failure); any
                                                     other conclusion is Ignored
    pull_request_review.submitted                    Reviewed, when changes are requested or it
                                                     comments; an approval alone is Ignored
    pull_request_review_comment.created              Reviewed: a comment on a line belongs to a
                                                     review, and the review is what is taken, once
    anything else of those events                    Ignored

What a failed check says: its name, conclusion, the output's title, summary and text (check_run
only: the other two events carry none, so their name and link alone), cut to EXCERPT_CHARS. The
failed job's log (the Actions API's zip) is not fetched: the check run's output is what the CI
chose to show, and it comes with the delivery.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.github.events import Ignored, as_list, as_mapping, as_text, is_own
from scheduler.bounds import MAX_ID, is_repository

CHECK_EVENTS = frozenset({"check_run", "check_suite", "workflow_run"})
REVIEW_EVENTS = frozenset({"pull_request_review", "pull_request_review_comment"})
FAILED = frozenset({"failure", "timed_out", "startup_failure"})
REVIEW_STATES = frozenset({"changes_requested", "commented"})
EXCERPT_CHARS = 4000  # of each of a check's summary and text, in the prompt
MAX_SHA_CHARS = 64  # SHA-256 object names; GitHub's are SHA-1, 40


@dataclass(frozen=True)
class CheckFailed:
    """A check that failed on a commit: which, where, and what it said."""

    source: str  # check_run | check_suite | workflow_run
    repository: str
    head_sha: str
    head_branch: str
    pull_requests: tuple[int, ...]  # the pull requests of the same repository it ran for
    name: str
    conclusion: str
    title: str = ""
    summary: str = ""
    text: str = ""
    url: str = ""
    installation_id: int | None = None
    action: str = "completed"

    @property
    def issue_key(self) -> str:
        number = self.pull_requests[0] if self.pull_requests else None
        return f"{self.repository}#{number}" if number is not None else f"{self.repository}@{self.head_branch}"


@dataclass(frozen=True)
class LineComment:
    path: str
    line: int | None  # None: a comment on a line no longer in the diff
    body: str
    author: str = ""


@dataclass(frozen=True)
class Reviewed:
    """A review of a pull request, or one of its line comments, by `reviewer`."""

    source: str  # pull_request_review | pull_request_review_comment
    repository: str
    number: int  # the pull request
    review_id: int
    reviewer: str
    association: str
    state: str = ""  # changes_requested | commented | approved; "" when a line comment's review is not known
    body: str = ""
    comment: LineComment | None = None  # the line comment that came with the event
    url: str = ""
    installation_id: int | None = None
    action: str = "submitted"

    @property
    def issue_key(self) -> str:
        return f"{self.repository}#{self.number}"


Feedback = CheckFailed | Reviewed


def parse(event: str, payload: Mapping[str, Any], *, bot_login: str) -> Feedback | Ignored | None:
    """Read a CI or review delivery; None for any other event (`bot.github.events` reads those)."""
    if event not in CHECK_EVENTS and event not in REVIEW_EVENTS:
        return None
    if not isinstance(payload, Mapping):
        return Ignored("the payload is not a JSON object")
    action = as_text(payload.get("action"))
    name = f"{event}.{action}" if action else event
    if is_own(as_mapping(payload.get("sender")), bot_login):
        return Ignored(f"{name} was sent by Pacer itself")
    repository = as_text(as_mapping(payload.get("repository")).get("full_name"))
    if not is_repository(repository):
        return Ignored(f"{name} carries no repository name")
    installation = _number(as_mapping(payload.get("installation")).get("id"), 2**63 - 1)
    if event in CHECK_EVENTS:
        return _check(event, action, payload, repository, installation)
    return _review(event, action, payload, repository, installation)


def _check(
    event: str, action: str, payload: Mapping[str, Any], repository: str, installation: int | None
) -> CheckFailed | Ignored:
    name = f"{event}.{action}"
    if action != "completed":
        return Ignored(f"{name} starts nothing: only a completed check is read")
    item = as_mapping(payload.get(event))
    conclusion = as_text(item.get("conclusion")).lower()
    if conclusion not in FAILED:
        return Ignored(f"{name} concluded {conclusion or 'nothing'}: only a failure becomes a turn")
    sha = as_text(item.get("head_sha"))
    suite = as_mapping(item.get("check_suite"))
    branch = as_text(item.get("head_branch")) or as_text(suite.get("head_branch"))
    if not sha or len(sha) > MAX_SHA_CHARS or not sha.isalnum():
        return Ignored(f"{name} carries no head commit")
    listed = [as_mapping(p) for p in as_list(item.get("pull_requests"))]
    pulls = tuple(n for p in listed if (n := _number(p.get("number"), MAX_ID)) is not None and _same_repository(p))
    if listed and not pulls:
        return Ignored(f"{name} ran for a pull request from a fork: not Pacer's branch")
    if not branch and not pulls:
        return Ignored(f"{name} names neither a branch nor a pull request")
    output = as_mapping(item.get("output"))
    if event == "check_suite":
        label = as_text(as_mapping(item.get("app")).get("name")) or "a check suite"
    elif event == "workflow_run":
        label = as_text(item.get("name")) or as_text(as_mapping(payload.get("workflow")).get("name")) or "a workflow"
    else:
        label = as_text(item.get("name")) or "a check"
    return CheckFailed(
        source=event,
        repository=repository,
        head_sha=sha,
        head_branch=branch,
        pull_requests=pulls,
        name=label[:200],
        conclusion=conclusion,
        title=as_text(output.get("title"))[:500],
        summary=as_text(output.get("summary"))[:EXCERPT_CHARS],
        text=as_text(output.get("text"))[:EXCERPT_CHARS],
        url=as_text(item.get("html_url")) or as_text(item.get("details_url")),
        installation_id=installation,
    )


def _same_repository(pull: Mapping[str, Any]) -> bool:
    """Whether a check's pull request comes from a branch of the repository itself: one from a
    fork is not Pacer's. One that names no repositories is taken as the repository's own."""
    head = as_mapping(as_mapping(pull.get("head")).get("repo")).get("id")
    base = as_mapping(as_mapping(pull.get("base")).get("repo")).get("id")
    return head is None or base is None or head == base


def _review(
    event: str, action: str, payload: Mapping[str, Any], repository: str, installation: int | None
) -> Reviewed | Ignored:
    name = f"{event}.{action}"
    pull = as_mapping(payload.get("pull_request"))
    number = _number(pull.get("number"), MAX_ID)
    if number is None:
        return Ignored(f"{name} carries no pull request number")
    if event == "pull_request_review":
        if action != "submitted":
            return Ignored(f"{name} starts nothing: only a submitted review is read")
        review = as_mapping(payload.get("review"))
        state = as_text(review.get("state")).lower()
        if state not in REVIEW_STATES:
            return Ignored(f"{name} ({state or 'no state'}) starts nothing: it neither asks for changes nor comments")
        author, source = review, review
        comment = None
        review_id = _number(review.get("id"), 2**63 - 1)
    else:
        if action != "created":
            return Ignored(f"{name} starts nothing: only a new comment on a line is read")
        source = as_mapping(payload.get("comment"))
        author, review, state = source, {}, ""
        comment = LineComment(
            path=as_text(source.get("path"))[:500],
            line=_number(source.get("line"), 2**31 - 1) or _number(source.get("original_line"), 2**31 - 1),
            body=as_text(source.get("body")),
            author=as_text(as_mapping(source.get("user")).get("login")),
        )
        review_id = _number(source.get("pull_request_review_id"), 2**63 - 1)
    if review_id is None:
        return Ignored(f"{name} carries no review id")
    return Reviewed(
        source=event,
        repository=repository,
        number=number,
        review_id=review_id,
        reviewer=as_text(as_mapping(author.get("user")).get("login")),
        association=as_text(author.get("author_association")).upper() or "NONE",
        state=state,
        body=as_text(review.get("body")) if review else "",
        comment=comment,
        url=as_text(source.get("html_url")),
        installation_id=installation,
        action=action,
    )


def _number(value: Any, largest: int) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= largest:
        return value
    return None
