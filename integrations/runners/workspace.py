"""Turns in the session's worktree: the runner edge where a session with a repository gets its
workspace before a turn, and its commits go back after it.

    runner = WorkspaceRunner(CommandRunner(...), Workspaces(root, remote), engine, publish=publisher)

Before a turn, a session whose row names a repository gets its worktree (`Workspaces.open`: made
on the first turn, reused after) and the turn runs there: it is the command's `{workdir}`. After
the turn, `publish` (integrations.github.publish) pushes new commits and opens or updates the
pull request, and what it did (branch, pull request, a rejected push) is recorded on the row's
`source["workspace"]`, where the status comment and the Slack thread read it. A session without
a repository runs as before, in its plain working directory. A turn whose session was stopped
(archived) while it ran publishes nothing: a stop means nothing more reaches the remote.

The scheduler never runs git: all of this happens on the worker thread, in the runner's place,
before the result is reported. A workspace that cannot be made fails the turn with git's words,
as a retryable failure (a fetch is usually a network away from working).

`WorkspaceJanitor` removes a session's worktree when it is archived, and `sweep` removes those of
sessions done for longer than PACER_WORKSPACE_TTL and reports the disk every workspace uses.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from integrations.tracked_pool import TrackedPool
from integrations.workspaces import Workspace, WorkspaceError, Workspaces
from scheduler.ports import Outcome, Runner, TurnRequest, TurnResult
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Status, StatusComment, Turn
from templates import render

log = logging.getLogger("pacer.workspaces")

RECORD_KEY = "workspace"  # source["workspace"]: branch, pull_request, push_error
_SESSION_DIR = re.compile(r"session-(\d+)")
FINISHED = frozenset({Status.DONE.value, Status.FAILED.value, Status.BLOCKED.value})


@dataclass(frozen=True)
class SessionWork:
    """What a turn's workspace needs to know of its session, read from the row."""

    session_id: int
    repository: str
    title: str  # without the "owner/name#12 " GitHub intake puts first
    issue: int | None = None  # the issue or pull request it came from, for "Refs #n"
    base: str | None = None  # the pull request's branch, when it came from one
    installation_id: int | None = None
    record: Mapping[str, Any] | None = None  # what earlier turns recorded
    requester: str | None = None  # who asked: `github:<login>`, a Slack user, an API caller
    link: str | None = None  # where to read about it: its status comment, its Slack thread, its issue
    turns: int = 0  # its finished turns so far, what they cost and how long they ran (the pull request says)
    cost_usd: float = 0.0
    duration_ms: int = 0


def read_work(engine: Engine, session_id: int) -> SessionWork | None:
    """The session's repository and what goes with it; None when it names no repository."""
    with DBSession(engine) as db:
        session = db.get(Session, session_id)
        if session is None or not session.repository:
            return None
        source = session.source if isinstance(session.source, dict) else {}
        link = _link(db, source)
        turns, cost, duration = db.exec(
            select(
                func.count(), func.coalesce(func.sum(Turn.cost_usd), 0.0), func.coalesce(func.sum(Turn.duration_ms), 0)
            ).where(Turn.session_id == session_id, col(Turn.finished_at).is_not(None))
        ).one()
        requester = session.requester
    same_repository = str(source.get("repository") or "").lower() == session.repository.lower()
    number = source.get("number") if same_repository else None
    base = source.get("head_ref") if same_repository and source.get("is_pull_request") else None
    installation = source.get("installation_id")
    record = source.get(RECORD_KEY)
    title = session.title
    if isinstance(number, int) and title.lower().startswith(prefix := f"{session.repository}#{number} ".lower()):
        title = title[len(prefix):]  # intake's "owner/name#12 " says nothing a branch or pull request needs
    return SessionWork(
        session_id, session.repository, title,
        issue=number if isinstance(number, int) else None, base=base if isinstance(base, str) else None,
        installation_id=installation if isinstance(installation, int) else None,
        record=record if isinstance(record, dict) else None,
        requester=requester, link=link, turns=int(turns), cost_usd=float(cost or 0), duration_ms=int(duration or 0),
    )


def _link(db: DBSession, source: Mapping[str, Any]) -> str | None:
    """The session's Slack thread, or its issue's status comment (the issue itself until there is one)."""
    slack = source.get("slack")
    if isinstance(slack, Mapping) and isinstance(slack.get("url"), str):
        return str(slack["url"])
    url, repository, number = source.get("url"), source.get("repository"), source.get("number")
    if source.get("kind") != "github" or not isinstance(url, str) or not url.startswith("https://"):
        return None
    comment = db.exec(
        select(StatusComment.comment_id).where(
            func.lower(col(StatusComment.repository)) == str(repository).lower(), StatusComment.number == number
        )
    ).first()
    return f"{url}#issuecomment-{comment}" if isinstance(comment, int) else url


def record_work(engine: Engine, session_id: int, workdir: str, record: Mapping[str, Any]) -> None:
    """Write the worktree's path and what the turn's publish did onto the session's row."""
    with session_scope(engine) as db:
        session = db.get(Session, session_id, with_for_update=True)
        if session is None:
            return
        session.workdir = workdir
        session.source = {
            **(session.source or {}),
            RECORD_KEY: dict(record),
        }  # reassigned: JSON is not tracked in place
        db.add(session)


Publish = Callable[[SessionWork, Workspace, TurnResult], Mapping[str, Any]]
# The token git may use for a session's repository: a GitHub App installation's, by its id.
Credentials = Callable[[int | None], str | None]


def token_for(credentials: Credentials | None, work: SessionWork) -> str | None:
    """The installation's token, or None (the remote's own token, if any) when there is none."""
    if credentials is None:
        return None
    try:
        return credentials(work.installation_id)
    except LookupError:  # an App, but a session no installation came with (Slack, the API)
        return None


class WorkspaceRunner:
    """Runner port: `inner` runs each turn in its session's worktree when the session has one."""

    def __init__(
        self,
        inner: Runner,
        spaces: Workspaces,
        engine: Engine,
        *,
        publish: Publish | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.inner = inner
        self.spaces = spaces
        self.engine = engine
        self.publish = publish
        self.credentials = credentials

    def halt(self, turn_id: int) -> bool:
        return self.inner.halt(turn_id)

    def run(self, request: TurnRequest) -> TurnResult:
        work = read_work(self.engine, request.session_id)
        if work is None:
            return self.inner.run(request)
        try:
            space = self.spaces.open(
                session_id=work.session_id,
                repository=work.repository,
                title=work.title,
                base=work.base,
                token=token_for(self.credentials, work),
            )
        except (WorkspaceError, OSError) as exc:
            log.warning("session #%s: no workspace for %s: %s", work.session_id, work.repository, exc)
            error = render("text/runner_error.j2", kind="workspace", repository=work.repository, message=str(exc))
            return TurnResult(outcome=Outcome.FAILED_RETRYABLE, error=error, agent_session_id=request.agent_session_id)
        result = self.inner.run(replace(request, workdir=str(space.path)))
        record: dict[str, Any] = {**(work.record or {}), "branch": space.branch}
        if self.publish is not None and _archived(self.engine, work.session_id):
            log.info("session #%s was stopped while its turn ran: nothing of it is pushed", work.session_id)
        elif self.publish is not None:
            try:
                record.update(self.publish(work, space, result))
            except Exception as exc:  # the turn's result is reported whatever befell its publishing
                log.exception("session #%s: publishing %s failed", work.session_id, space.branch)
                record["push_error"] = f"{type(exc).__name__}: {exc}"[:500]
        record["disk_bytes"] = self.spaces.worktree_bytes(work.session_id)
        record_work(self.engine, work.session_id, str(space.path), record)
        return replace(result, extra={**result.extra, RECORD_KEY: record})


def _archived(engine: Engine, session_id: int) -> bool:
    with DBSession(engine) as db:
        session = db.get(Session, session_id)
        return session is None or session.status == Status.ARCHIVED.value


class WorkspaceJanitor:
    """Notifier: an archived session's worktree is removed, off the notifying thread."""

    def __init__(self, engine: Engine, spaces: Workspaces) -> None:
        self.engine = engine
        self.spaces = spaces
        self._pool = TrackedPool(1, "workspace-janitor")

    def notify(self, event: str, context: Mapping[str, Any]) -> None:
        session_id = context.get("session_id")
        if event == "archived" and isinstance(session_id, int):
            self._pool.submit(self._remove, session_id)

    def _remove(self, session_id: int) -> None:
        with DBSession(self.engine) as db:
            session = db.get(Session, session_id)
            repository = session.repository if session is not None else None
        if repository:
            try:
                if self.spaces.remove(session_id, repository):
                    log.info("session #%s archived: its worktree is removed", session_id)
            except WorkspaceError as exc:
                log.warning("session #%s archived, but its worktree stays: %s", session_id, exc)

    def drain(self, timeout: float = 30.0) -> bool:
        return self._pool.drain(timeout)


def sweep(engine: Engine, spaces: Workspaces, now: datetime, ttl: timedelta) -> Mapping[str, int]:
    """Remove the worktrees of sessions archived, or finished longer than `ttl` ago; then, while
    every workspace together uses more than `spaces.max_bytes`, those of finished sessions,
    oldest first (a running or waiting session's is never taken). Returns the bytes each
    workspace left uses (`Workspaces.usage`), which it also logs."""
    sessions_dir = spaces.root / "sessions"
    found = [
        int(m.group(1))
        for p in (sessions_dir.iterdir() if sessions_dir.exists() else ())
        if (m := _SESSION_DIR.fullmatch(p.name))
    ]
    with DBSession(engine) as db:
        rows = [(sid, row) for sid in sorted(found) if (row := db.get(Session, sid)) is not None and row.repository]
    removed: list[int] = []
    finished = sorted(
        (
            (s.finished_at or s.updated_at or now, sid, s)
            for sid, s in rows
            if s.status in FINISHED or s.status == Status.ARCHIVED.value
        ),
        key=lambda item: (item[0], item[1]),
    )
    for at, session_id, session in finished:
        if session.status == Status.ARCHIVED.value or at + ttl <= now:
            _remove(spaces, session_id, str(session.repository), removed)
    usage = spaces.usage()
    for _at, session_id, session in finished:
        if spaces.max_bytes is None or sum(usage.values()) <= spaces.max_bytes:
            break
        if session_id not in removed and _remove(spaces, session_id, str(session.repository), removed):
            usage = spaces.usage()
    if spaces.max_bytes is not None and sum(usage.values()) > spaces.max_bytes:
        log.warning(
            "workspaces use %s bytes, over the %s PACER_WORKSPACES_MAX_MB allows, all of it sessions still at work",
            f"{sum(usage.values()):,}",
            f"{spaces.max_bytes:,}",
        )
    log.info(
        "workspaces: %d worktrees removed (%s); %s bytes in use: %s",
        len(removed),
        ", ".join(f"#{i}" for i in removed) or "none",
        f"{sum(usage.values()):,}",
        ", ".join(f"{k}={v:,}" for k, v in usage.items()),
    )
    return usage


def _remove(spaces: Workspaces, session_id: int, repository: str, removed: list[int]) -> bool:
    try:
        if spaces.remove(session_id, repository):
            removed.append(session_id)
            return True
    except WorkspaceError as exc:
        log.warning("session #%s: its worktree stays: %s", session_id, exc)
    return False


__all__ = [
    "RECORD_KEY",
    "Credentials",
    "SessionWork",
    "WorkspaceJanitor",
    "WorkspaceRunner",
    "read_work",
    "record_work",
    "sweep",
    "token_for",
]
