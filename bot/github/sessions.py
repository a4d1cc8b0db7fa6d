"""Which sessions a GitHub event speaks to: those born of its issue, and for a comment on a pull
request, those whose work became it (`source["workspace"]["pull_request"]`, recorded by
`integrations.runners.workspace`).

    sessions_of_issue(db, "acme/api#7")    every GitHub session of the issue, oldest first
    comment_session(db, event)             the session a trusted comment is a message to, or None
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy import func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.github.events import IntakeEvent, Kind, is_trusted, who_acted
from scheduler.front import Session, Status

log = logging.getLogger("pacer.intake")

GITHUB_GENESES = (Kind.GITHUB_ISSUE.value, Kind.GITHUB_LABEL.value)


def sessions_of_issue(db: DBSession, issue_key: str) -> Sequence[Session]:
    """Every GitHub session of one issue, for the controls and comments (rare: a scan is fine)."""
    stmt = select(Session).where(
        col(Session.genesis).in_(GITHUB_GENESES),
        func.lower(col(Session.source)["issue_key"].as_string()) == issue_key.lower(),
    )
    return db.exec(stmt.order_by(col(Session.id))).all()


def sessions_of_pull_request(db: DBSession, repository: str, number: int) -> Sequence[Session]:
    """The sessions whose branch became pull request `number` of `repository`."""
    opened = col(Session.source)[("workspace", "pull_request", "number")].as_integer()
    stmt = select(Session).where(func.lower(col(Session.repository)) == repository.lower(), opened == number)
    return db.exec(stmt.order_by(col(Session.id))).all()


def comment_session(db: DBSession, event: IntakeEvent) -> int | None:
    """The session a comment is a human message to: the newest not archived of its issue, or of
    the pull request Pacer opened. None (with a log line) for an author without write access."""
    if not is_trusted(event):
        login, association = who_acted(event)
        log.info(
            "github: a comment on %s by %s (%s) is not a message to Pacer: only people with write access speak to a "
            "session",
            event.issue_key,
            login,
            association,
        )
        return None
    found = [*sessions_of_issue(db, event.issue_key)]
    if event.is_pull_request:
        found += sessions_of_pull_request(db, event.repository, event.number)
    live = [s.id or 0 for s in found if s.status != Status.ARCHIVED.value]
    if not live:
        log.info("github: a comment on %s: no session of that issue or pull request to give it to", event.issue_key)
        return None
    return max(live)
