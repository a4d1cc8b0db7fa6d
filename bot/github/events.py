"""GitHub webhook payloads as Pacer reads them: a typed `IntakeEvent`, or `Ignored` with a reason.

Pure: a payload (already verified and decoded) in, a value out; no database, no network, and no
payload can make `parse` raise. Routing is on the `X-GitHub-Event` header plus `action`:

    issues.opened                              github_issue   (a github_issue trigger may fire)
    issues.labeled, pull_request.labeled       github_label   (a github_label trigger may fire)
        ... with `pacer:priority`              control: priority (make that session priority)
        ... with `pacer:hold`                  control: hold (an operator hold on it)
    issues.unlabeled / pull_request.unlabeled
        ... with `pacer:hold`                  control: release
        ... with any other label               control: unlabel (stop the sessions a github_label
                                               trigger started with that label)
    issues.closed, pull_request.closed         control: close (stop its sessions: a running turn
                                               halted, each archived; for a pull request Pacer
                                               opened, its session's too; prerequisites naming
                                               the issue are satisfied)
    issues.reopened, pull_request.reopened     control: reopen
    issue_comment.created                      comment (a human message on the session of that
                                               issue or of the pull request Pacer opened); once
                                               per comment id, whatever its delivery ids
        ... with a line `/hold`                control: hold (Prow's; `/hold cancel`: release)
    anything else (issue_comment.edited too),  Ignored
    Pacer's own events, and its own comments
    (they begin with its marker, `markers`)

Text is read as it can be stored: a NUL or a lone surrogate (JSON can escape both) becomes U+FFFD,
so a delivery is never refused, nor redelivered for ever, for one bad character in an issue body.
An issue number past what a row holds, or a repository name GitHub would never send
(`scheduler.bounds.is_repository`: the rule every door holds), is Ignored, never refused with a
5xx that GitHub would redeliver for ever.

Trust follows the label- and mention-triggered agents: only people with write access start
work, read from `author_association` (OWNER, MEMBER, COLLABORATOR); a comment is judged by its
own author's association. A label event carries no
association for the person who labeled, so it is inferred: labelling your own issue is judged by
your association as its author; labelling someone else's needs triage access or more, which
GitHub grants only to collaborators and members; another bot's label counts as nobody's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from integrations.github import markers
from scheduler.bounds import MAX_COST_CAP_USD, MAX_ID, clean_text, is_repository

TRUSTED_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
PRIORITY_LABEL = "pacer:priority"
COST_CAP_LABEL = re.compile(r"pacer:cap-\$?(\d{1,6}(?:\.\d{1,2})?)", re.ASCII)  # pacer:cap-5, pacer:cap-2.50
HOLD_LABEL = "pacer:hold"
CONTROL_LABELS = frozenset({PRIORITY_LABEL, HOLD_LABEL})
# Someone able to label another person's issue has triage access or more: a collaborator.
INFERRED_LABELER_ASSOCIATION = "COLLABORATOR"
MAX_INSTALLATION_ID = 2**63 - 1
# Prow's hold commands: a line of their own anywhere in a comment.
HOLD_COMMAND = re.compile(r"^/hold(\s+cancel)?\s*$", re.IGNORECASE | re.MULTILINE)


class Kind(StrEnum):
    GITHUB_ISSUE = "github_issue"
    GITHUB_LABEL = "github_label"
    CONTROL = "control"
    COMMENT = "comment"


class Control(StrEnum):
    PRIORITY = "priority"
    HOLD = "hold"
    RELEASE = "release"
    CLOSE = "close"
    REOPEN = "reopen"
    CAP = "cap"  # a `pacer:cap-<usd>` label added to an issue whose session runs or waits
    UNLABEL = "unlabel"  # a label removed: the sessions its github_label trigger started stop


@dataclass(frozen=True)
class IntakeEvent:
    kind: Kind
    action: str  # GitHub's action: opened | labeled | unlabeled | closed
    repository: str  # owner/name
    number: int
    title: str
    body: str
    url: str  # the issue's or pull request's page
    labels: tuple[str, ...]
    author: str
    author_association: str
    labeler: str | None  # who added or removed `label`
    labeler_association: str | None
    is_pull_request: bool
    label: str | None = None
    control: Control | None = None
    state: str = "open"
    sender: str = ""
    installation_id: int | None = None
    comment: str | None = None  # issue_comment: what the comment says
    comment_id: int | None = None  # and its id, the same in every delivery of it
    commenter: str | None = None
    commenter_association: str | None = None
    head_ref: str | None = None  # a pull request's branch, when it lives in the same repository

    @property
    def issue_key(self) -> str:
        """`owner/name#12`: how a session born of this issue is found again."""
        return f"{self.repository}#{self.number}"

    @property
    def actor(self) -> str:
        return self.commenter or self.labeler or self.sender or self.author


@dataclass(frozen=True)
class Ignored:
    reason: str


def parse(event: str, payload: Mapping[str, Any], *, bot_login: str) -> IntakeEvent | Ignored:
    """Read one delivery. Never raises: a payload without the fields Pacer needs is Ignored."""
    if not isinstance(payload, Mapping):
        return Ignored("the payload is not a JSON object")
    action = as_text(payload.get("action"))
    name = f"{event}.{action}" if action else event
    sender = as_mapping(payload.get("sender"))
    if is_own(sender, bot_login):
        return Ignored(f"{name} was sent by Pacer itself ({as_text(sender.get('login'))})")
    if event not in {"issues", "pull_request", "issue_comment"}:
        return Ignored(f"{event} events start nothing")
    noun = "pull_request" if event == "pull_request" else "issue"
    item = payload.get(noun)
    repo = payload.get("repository")
    if not isinstance(item, Mapping) or not isinstance(repo, Mapping):
        return Ignored(f"{name} carries no {noun} or repository")
    number = item.get("number")
    full_name = as_text(repo.get("full_name"))
    if (
        not isinstance(number, int)
        or isinstance(number, bool)
        or not 1 <= number <= MAX_ID
        or not is_repository(full_name)
    ):
        return Ignored(f"{name} carries no issue number or repository name")
    label = _label_name(payload.get("label"))
    comment = as_mapping(payload.get("comment"))
    if event == "issue_comment" and markers.is_pacers(as_text(comment.get("body"))):
        return Ignored(
            f"{name} is Pacer's own comment (it begins with Pacer's marker), posted by "
            f"{as_text(sender.get('login')) or 'nobody'}"
        )
    kind, control = _route(event, action, label, as_text(comment.get("body")))
    if kind is None:
        return Ignored(f"{name}{f' ({label})' if label else ''} starts nothing")
    user = as_mapping(item.get("user"))
    author = as_text(user.get("login"))
    association = as_text(item.get("author_association")).upper() or "NONE"
    sender_login = as_text(sender.get("login"))
    labeler = sender_login if action in {"labeled", "unlabeled"} else None
    installation = payload.get("installation")
    return IntakeEvent(
        kind=kind,
        action=action,
        repository=full_name,
        number=number,
        title=as_text(item.get("title")),
        body=as_text(item.get("body")),
        url=as_text(item.get("html_url")),
        labels=tuple(n for n in (_label_name(x) for x in as_list(item.get("labels"))) if n),
        author=author,
        author_association=association,
        labeler=labeler,
        labeler_association=labeler_association(labeler, as_text(sender.get("type")), author, association)
        if labeler
        else None,
        is_pull_request=event == "pull_request" or isinstance(item.get("pull_request"), Mapping),
        label=label or None,
        control=control,
        state=as_text(item.get("state")) or "open",
        sender=sender_login,
        installation_id=_int(installation.get("id")) if isinstance(installation, Mapping) else None,
        **_commented(comment) if event == "issue_comment" else {},
        head_ref=_head_ref(item, full_name),
    )


def _head_ref(item: Mapping[str, Any], repository: str) -> str | None:
    """The branch a pull request comes from, when it is a branch of `repository` (not a fork's)."""
    head = as_mapping(item.get("head"))
    same = as_text(as_mapping(head.get("repo")).get("full_name")).lower() == repository.lower()
    return (as_text(head.get("ref")) or None) if same else None


def _commented(comment: Mapping[str, Any]) -> dict[str, Any]:
    return {"comment": as_text(comment.get("body")), "comment_id": _int(comment.get("id")),
            "commenter": as_text(as_mapping(comment.get("user")).get("login")),
            "commenter_association": as_text(comment.get("author_association")).upper() or "NONE"}


def _route(event: str, action: str, label: str, comment: str = "") -> tuple[Kind | None, Control | None]:
    lowered = label.lower()
    if event == "issue_comment":
        if action != "created" or not comment.strip():
            return None, None
        hold = HOLD_COMMAND.search(comment)
        if hold is not None:
            return Kind.CONTROL, Control.RELEASE if hold.group(1) else Control.HOLD
        return Kind.COMMENT, None
    if action == "opened" and event == "issues":
        return Kind.GITHUB_ISSUE, None
    if action == "labeled":
        if lowered == PRIORITY_LABEL:
            return Kind.CONTROL, Control.PRIORITY
        if lowered == HOLD_LABEL:
            return Kind.CONTROL, Control.HOLD
        if cost_cap_of([lowered]) is not None:
            return Kind.CONTROL, Control.CAP
        return (Kind.GITHUB_LABEL, None) if label else (None, None)
    if action == "unlabeled" and lowered == HOLD_LABEL:
        return Kind.CONTROL, Control.RELEASE
    if action == "unlabeled" and label and lowered != PRIORITY_LABEL and cost_cap_of([lowered]) is None:
        return Kind.CONTROL, Control.UNLABEL
    if action == "closed":
        return Kind.CONTROL, Control.CLOSE
    if action == "reopened":
        return Kind.CONTROL, Control.REOPEN
    return None, None


def is_own(sender: Mapping[str, Any], bot_login: str) -> bool:
    """Pacer's own account (its GitHub App's `name[bot]` login, or the token's user)."""
    login = as_text(sender.get("login")).lower()
    wanted = bot_login.lower()
    if not login or not wanted:
        return False
    return login == wanted or (as_text(sender.get("type")) == "Bot" and login == f"{wanted}[bot]")


def labeler_association(labeler: str, sender_type: str, author: str, author_association: str) -> str:
    if labeler.lower() == author.lower():
        return author_association
    if sender_type == "Bot":
        return "NONE"  # a workflow's bot acts with the rights of whoever triggered it
    return INFERRED_LABELER_ASSOCIATION


def is_trusted(event: IntakeEvent, trusted: frozenset[str] = TRUSTED_ASSOCIATIONS) -> bool:
    """Whether the person who made this event happen may start or steer work.

    Closing, reopening and removing a trigger label need no more trust than GitHub itself asks
    (triage access to unlabel): they withdraw work or report an issue's state, never start work.
    """
    if event.control in (Control.CLOSE, Control.REOPEN, Control.UNLABEL):
        return True
    if event.commenter is not None:
        return (event.commenter_association or "NONE") in trusted
    if event.labeler is not None:
        return (event.labeler_association or "NONE") in trusted
    return event.author_association in trusted


def who_acted(event: IntakeEvent) -> tuple[str, str]:
    """(login, association) of the person trust was judged on, for the log line."""
    if event.commenter is not None:
        return event.commenter, event.commenter_association or "NONE"
    if event.labeler is not None:
        return event.labeler, event.labeler_association or "NONE"
    return event.author, event.author_association


def _label_name(label: Any) -> str:
    if isinstance(label, Mapping):
        return as_text(label.get("name"))
    return ""


def as_mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def as_text(value: Any) -> str:
    return clean_text(value) if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_INSTALLATION_ID:
        return value
    return None


def cost_cap_of(labels: Iterable[str]) -> float | None:
    """The cost cap a `pacer:cap-<usd>` label sets (the lowest, when several do); None if none
    does. A label that is not a cap above 0 (`pacer:cap-0`, `pacer:cap-lots`) sets nothing."""
    caps = [float(m.group(1)) for label in labels if (m := COST_CAP_LABEL.fullmatch(label.lower())) is not None]
    return min((cap for cap in caps if 0 < cap <= MAX_COST_CAP_USD), default=None)
