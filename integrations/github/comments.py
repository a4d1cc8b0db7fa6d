"""Talking back to GitHub: one sticky status comment per issue, edited as its session moves.

Off the webhook path and idempotent, because PyGithub's retry can sleep until a rate-limit reset
and the network can fail after GitHub acted:

  * `StatusComments` is a `scheduler.ports.Notifier`. A notice (started, held, paused, done,
    failed, archived, refused, budget_ending; github_control when a label moved a class or a hold) only
    queues a refresh of that session on one
    worker thread — never a GitHub call inside a scheduler transaction or a request. Refreshes
    of the same session coalesce while queued. A `progress` notice (a running turn's agent did
    something) is spaced: see PROGRESS_SECONDS for the bound.
  * A refresh reads the session's state from its row (`status.read_status`), renders the body,
    and skips GitHub when the stored body is the same. Otherwise `PyGithubComments.upsert`
    edits the comment it knows, or finds one by the hidden marker, and creates one only when
    neither exists; the id is kept in `status_comments`.
  * PyGithub is bounded (`integrations.github.client`): a create is never retried blind; it is
    found again by its marker instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DBSession
from sqlmodel import select

from integrations.github.client import GithubClients
from integrations.github.status import MARKER, Where, read_status, render_body
from integrations.spacing import Spacing, StoreBucket
from integrations.tracked_pool import TrackedPool
from scheduler.ports import Clock
from scheduler.store.db import session_scope
from scheduler.store.models import StatusComment
from templates import error_text

log = logging.getLogger("pacer.github")

NOTICES = frozenset(
    {"started", "held", "paused", "done", "failed", "archived", "refused", "github_control", "budget_ending"}
)
PROGRESS = "progress"  # a running turn's agent did something (`integrations.turn_progress`): spaced
# A running turn's progress edits its issue's comment at most once every PROGRESS_SECONDS, and the
# progress edits of all issues and every process together are one bucket (in the database) of
# PROGRESS_BURST refilled at PROGRESS_PER_HOUR: at most 6 edits a minute for one turn, and in any
# hour at most 180 (150 + 30) for all, however many processes run turns: a third of GitHub's
# secondary limit of 500 content-creating requests an hour (80 a minute). A state change (started,
# done, failed ...) is never held back: the final edit, the whole answer, goes at once.
PROGRESS_SECONDS = 10.0
PROGRESS_PER_HOUR = 150
PROGRESS_BURST = 30


class CommentPort(Protocol):
    """The one thing Pacer asks of GitHub: make this issue's status comment say `body`."""

    def upsert(self, where: Where, body: str, *, comment_id: int | None) -> int: ...


class PyGithubComments:
    """`CommentPort` over PyGithub, with a personal token or a GitHub App's installation."""

    def __init__(self, clients: GithubClients) -> None:
        self.clients = clients

    def upsert(self, where: Where, body: str, *, comment_id: int | None) -> int:
        from github import UnknownObjectException

        issue = self.clients.client(where.installation_id).get_repo(where.repository).get_issue(where.number)
        if comment_id is not None:
            try:
                known = issue.get_comment(comment_id)
            except UnknownObjectException:
                known = None  # deleted by someone: find another or make a new one
            if known is not None and MARKER in (known.body or ""):
                return _edited(known, body)
        for comment in issue.get_comments():
            if MARKER in (comment.body or ""):
                return _edited(comment, body)
        created = issue.create_comment(body)
        return int(created.id)


def _edited(comment: Any, body: str) -> int:
    if comment.body != body:
        comment.edit(body)
    return int(comment.id)


class StatusComments:
    """The GitHub side of the Notifier port: notices in, sticky comments out, on one thread."""

    def __init__(
        self, engine: Engine, port: CommentPort, *, clock: Clock, progress_seconds: float = PROGRESS_SECONDS
    ) -> None:
        self._engine = engine
        self._port = port
        self._clock = clock
        self._pool = TrackedPool(1, "github-comments")
        self._queued: set[int] = set()
        self._lock = threading.Lock()
        self._running: set[int] = set()  # sessions whose refresh runs now
        self._again: set[int] = set()  # ... and whose progress changed meanwhile
        self._progress: Spacing[int] = Spacing(
            progress_seconds, self._queue_progress, name="github-progress",
            bucket=StoreBucket(engine, "github-progress", PROGRESS_PER_HOUR, PROGRESS_BURST),  # every process's
        )

    def notify(self, event: str, context: Mapping[str, Any]) -> None:
        session_id = context.get("session_id")
        if not isinstance(session_id, int):
            return
        if event == PROGRESS:
            self._progress.ask(session_id)
        elif event in NOTICES:
            self._progress.mark(session_id)  # its edit is on the way: the next progress edit waits a gap
            self._queue(session_id)

    def _queue(self, session_id: int) -> None:
        with self._lock:
            if session_id in self._queued:
                return  # the queued refresh reads the row when it runs: it will see this change
            try:
                self._pool.submit(self._run, session_id)
            except RuntimeError:  # the pool has shut down: the process is stopping
                return
            self._queued.add(session_id)

    def _queue_progress(self, session_id: int) -> None:
        """A spaced progress edit. While the session's refresh runs (GitHub can take longer than
        the gap) it is asked again when that one ends, so it waits its gap from that edit."""
        with self._lock:
            if session_id in self._running and session_id not in self._queued:
                self._again.add(session_id)
                return
        self._queue(session_id)

    def _run(self, session_id: int) -> None:
        with self._lock:
            self._queued.discard(session_id)
            self._running.add(session_id)
        try:
            self.refresh(session_id)
        except Exception as exc:  # one line naming what to do: a traceback a refresh would only repeat
            problem = error_text("comments/not_updated", session_id=session_id, problem=why_not_written(exc))
            log.warning(problem, extra={"session_id": session_id})
        finally:
            with self._lock:
                self._running.discard(session_id)
                again = session_id in self._again
                self._again.discard(session_id)
            if again:
                self._progress.ask(session_id)

    def refresh(self, session_id: int) -> int | None:
        """Make the session's issue comment match its row. Returns the comment id, or None when
        the session has no GitHub issue or the comment already says this."""
        now = self._clock.now()
        with DBSession(self._engine) as db:  # read-only
            found = read_status(db, session_id, now)
            if found is None:
                return None
            where, view = found
            stored = _stored(db, where)
            known_id, known_body = (stored.comment_id, stored.body) if stored is not None else (None, None)
        body = render_body(view)
        if known_id is not None and known_body == body:
            return None
        comment_id = self._port.upsert(where, body, comment_id=known_id)  # GitHub: outside any transaction
        self._progress.mark(session_id)  # the next progress edit waits its gap from this one
        self._remember(where, comment_id, body)
        log.info("github: status of session #%s on %s#%s: %s", session_id, where.repository, where.number, view.state)
        return comment_id

    def _remember(self, where: Where, comment_id: int, body: str) -> None:
        now = self._clock.now()
        for _attempt in range(2):
            try:
                with session_scope(self._engine) as db:
                    row = _stored(db, where) or StatusComment(repository=where.repository, number=where.number)
                    row.comment_id, row.body, row.updated_at = comment_id, body, now
                    db.add(row)
                return
            except IntegrityError:
                continue  # another writer made the row first: update it instead

    def drain(self, timeout: float = 30.0) -> bool:
        return self._pool.drain(timeout)

    def close(self, timeout: float = 30.0) -> None:
        self._progress.close()
        self.drain(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)


def why_not_written(exc: BaseException) -> str:
    """What went wrong with a GitHub write, and what to do about it, in a clause. PyGithub's
    errors carry the HTTP status; a transport error (requests') carries none."""
    status = getattr(exc, "status", None)
    data = getattr(exc, "data", None)
    message = str(data.get("message", "")) if isinstance(data, dict) else ""
    if status == 401:
        return error_text("comments/bad_credentials")
    if status == 403 and "rate limit" in message.lower():
        return error_text("comments/rate_limited")
    if status == 403:
        return error_text("comments/forbidden", message=message)
    if status == 404:
        return error_text("comments/not_found")
    if isinstance(status, int):
        return error_text("comments/github_status", status=status, message=message)
    if isinstance(exc, (ConnectionError, TimeoutError, OSError)) or type(exc).__module__.startswith(
        ("requests", "urllib3")
    ):
        return error_text("comments/unreachable", error=type(exc).__name__)
    return error_text("comments/other", error=type(exc).__name__, detail=str(exc).splitlines()[0] if str(exc) else "")


def _stored(db: DBSession, where: Where) -> StatusComment | None:
    stmt = select(StatusComment).where(
        StatusComment.repository == where.repository, StatusComment.number == where.number
    )
    return db.exec(stmt).first()

