"""Pacer's GitHub App, as GitHub's App manifest (JSON): what `pacer github-app` posts to GitHub's
"register a GitHub App from a manifest" form. deploy/github-app.yml is the same App for people
who register it by hand (tests/system/test_github_app.py keeps the two alike)."""

from __future__ import annotations

from typing import Any

# What Pacer does on a repository: comments on issues and pull requests, reads and writes
# labels, pushes a session's branch and opens its draft pull request; reads the checks and
# workflow runs on that pull request, whose failures become the session's next turn.
PERMISSIONS = {
    "issues": "write",
    "pull_requests": "write",
    "contents": "write",
    "metadata": "read",
    "checks": "read",
    "actions": "read",
}
# The events Pacer reads (a label put on arrives as `issues` / `pull_request` with action `labeled`;
# a failed check as `check_run`, `check_suite` or `workflow_run`; a review and its comments on
# lines as `pull_request_review` and `pull_request_review_comment`).
EVENTS = [
    "issues",
    "issue_comment",
    "pull_request",
    "check_run",
    "check_suite",
    "workflow_run",
    "pull_request_review",
    "pull_request_review_comment",
]
DESCRIPTION = (
    "Schedules AI coding-agent work under a finite quota; starts a session when an issue gets Pacer's trigger label."
)


def manifest(*, name: str, public_url: str, redirect_url: str) -> dict[str, Any]:
    """The manifest for an App named `name` whose webhooks go to `public_url`/github/webhook, and
    whose registration sends the browser back to `redirect_url` with the code to exchange."""
    base = public_url.rstrip("/")
    return {
        "name": name,
        "url": base,
        "description": DESCRIPTION,
        "public": False,
        "hook_attributes": {"url": f"{base}/github/webhook", "active": True},
        "redirect_url": redirect_url,
        "default_permissions": dict(PERMISSIONS),
        "default_events": list(EVENTS),
    }


def form_action(github_url: str, org: str | None, state: str) -> str:
    """Where the form posts: the account's new-App page, or the organization's."""
    base = github_url.rstrip("/")
    page = f"{base}/organizations/{org}/settings/apps/new" if org else f"{base}/settings/apps/new"
    return f"{page}?state={state}"
