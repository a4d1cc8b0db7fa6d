"""Which GitHub trigger an event fires, and what the session it starts is given: the facts its
prompt template reads and the source the status comment and the controls find it by. Pure: an
`IntakeEvent` and a trigger's config in, a value out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.github.events import TRUSTED_ASSOCIATIONS, IntakeEvent, Kind
from scheduler.front import Trigger

DEFAULT_TRIGGER_LABEL = "pacer"


def github_trigger_mismatch(kind: str, config: Mapping[str, Any], event: IntakeEvent) -> str | None:
    """Why this trigger does not fire on this event, or None when it does. Pure.

    Config (all optional): `repositories` ["owner/name", …] (absent: any repository whose
    events reach the webhook), `authors` [login, …], `labels` [name, …] (github_issue: the issue
    carries one of them), `label` (github_label: the label that starts work, default "pacer"),
    `issues` / `pull_requests` (github_label: set one false to take only the other),
    `trusted_associations` (default OWNER, MEMBER, COLLABORATOR).
    """
    repositories = _names(config.get("repositories"))
    if repositories and event.repository.lower() not in repositories:
        return f"repository {event.repository} is not in {sorted(repositories)}"
    authors = _names(config.get("authors"))
    if authors and event.author.lower() not in authors:
        return f"author {event.author} is not in {sorted(authors)}"
    if kind == Kind.GITHUB_ISSUE.value:
        if event.action != "opened" or event.is_pull_request:
            return "github_issue fires on issues.opened only"
        wanted = _names(config.get("labels"))
        if wanted and not wanted & {label.lower() for label in event.labels}:
            return f"the issue carries none of {sorted(wanted)}"
        return None
    if kind == Kind.GITHUB_LABEL.value:
        label = str(config.get("label") or DEFAULT_TRIGGER_LABEL).lower()
        if event.action != "labeled" or (event.label or "").lower() != label:
            return f"github_label fires on the label {label!r} being added"
        if event.is_pull_request and config.get("pull_requests") is False:
            return "this trigger takes issues only"
        if not event.is_pull_request and config.get("issues") is False:
            return "this trigger takes pull requests only"
        return None
    return f"{kind} is not a GitHub trigger"


def github_facts(event: IntakeEvent) -> dict[str, Any]:
    """What a GitHub trigger's prompt template may read."""
    return {
        "title": event.title,
        "body": event.body,
        "url": event.url,
        "labels": list(event.labels),
        "author": event.author,
        "repository": event.repository,
        "number": event.number,
        "is_pull_request": event.is_pull_request,
        "label": event.label,
        "text": f"{event.title}\n\n{event.body}".strip(),
    }


def github_source(event: IntakeEvent, trigger: Trigger) -> dict[str, Any]:
    """Where the session came from, and how the status comment and the controls find it again."""
    return {
        "kind": "github",
        "repository": event.repository,
        "number": event.number,
        "url": event.url,
        "labels": list(event.labels),
        "author": event.author,
        "issue_state": event.state,
        "issue_key": event.issue_key,
        "is_pull_request": event.is_pull_request,
        "head_ref": event.head_ref,  # the branch its worktree starts from (integrations.runners.workspace)
        "installation_id": event.installation_id,
        "trigger": trigger.name,
    }


def trusted_associations(config: Mapping[str, Any]) -> frozenset[str]:
    """Who may start work on a trigger: its `trusted_associations`, else GitHub's write access."""
    configured = config.get("trusted_associations")
    if isinstance(configured, list) and configured:
        return frozenset(str(a).upper() for a in configured)
    return TRUSTED_ASSOCIATIONS


def _names(value: Any) -> set[str]:
    if isinstance(value, str):
        value = [value]
    return {str(v).lower() for v in value} if isinstance(value, list) else set()
