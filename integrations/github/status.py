"""What the sticky status comment says: a session's state read from its row, as one `StatusView`.

The view is derived from the row each time, never from the notice that asked for it, so notices
arriving late, twice or out of order still end on the comment that matches the database:

    queued    waiting; spot sessions show their place in the spot queue and, when the gate held
              the last ask, why and when it is asked again
    held      a priority session waiting on a hold (a queue hold, its group, an operator hold)
    started   a turn is running; with what its agent is doing (the tool in use, its todo list as a
              checklist, how long the turn has run, the cost so far: `turn_reads.running_progress`),
              and the early notice when a window's spot budget runs out soon
              (`scheduler.pauses.budget_notice`), until that window rolls over
    paused    a pause, a park, a sleep, or waiting for a person's input
    done / failed / archived (with who stopped it and why, and whether a turn was halted)

Below the state, once a turn has finished, a collapsible section holds the latest result in full
(the agent's final message, or the turn's error) with its cost, duration, the session's turns,
and links to its branch and pull request (`WorkView`, read from the turns and the workspace
record `integrations.runners.workspace` keeps on the row: `integrations.latest_result`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from integrations.github import markers
from integrations.latest_result import LatestResult, read_latest_result
from scheduler.engine.lifecycle import STOPPED_KEY
from scheduler.holds.operator import applies, live_holds
from scheduler.pauses.budget_notice import RunOut, standing_notice
from scheduler.rules.genesis import SchedulingClass
from scheduler.rules.waiting import OVERTAKEN, waiting_reason
from scheduler.store.models import Session, Status, Turn
from scheduler.store.policy import load_policy
from scheduler.store.sessions import class_expr, class_of
from scheduler.store.turn_reads import running_progress, spent_by
from templates import render

MARKER = markers.STATUS


@dataclass(frozen=True)
class Where:
    """The issue a session talks back to."""

    repository: str
    number: int
    installation_id: int | None = None


@dataclass(frozen=True)
class StatusView:
    state: str  # queued | held | started | paused | done | failed | archived
    session_id: int
    title: str
    scheduling_class: str
    position: int | None = None  # 1-based place among waiting spot sessions
    queued: int | None = None  # waiting spot sessions in all
    why: str | None = None
    until: datetime | None = None
    operator_hold: str | None = None
    work: LatestResult | None = None
    cost_cap: float | None = None  # the session's cost cap, shown with `spent`
    spent: float = 0.0
    ending: RunOut | None = None  # a running spot session told its window's spot budget runs out soon
    stopped: dict[str, Any] | None = None  # archived: who stopped it, why, and whether a turn was halted
    progress: dict[str, Any] | None = None  # started: what its agent is doing (`turn_reads.running_progress`)


RESULT_CHARS = 60_000  # GitHub takes 65,536 characters in a comment; the rest is the frame


def where_of(session: Session) -> Where | None:
    """The issue of a session GitHub intake created, or None for every other session."""
    source = session.source if isinstance(session.source, dict) else {}
    repository, number = source.get("repository"), source.get("number")
    if source.get("kind") != "github" or not isinstance(repository, str) or not isinstance(number, int):
        return None
    installation = source.get("installation_id")
    return Where(repository, number, installation if isinstance(installation, int) else None)


def status_view(
    session: Session, scheduling_class: SchedulingClass, now: datetime, *, position: int | None = None,
    queued: int | None = None, operator_hold: str | None = None, error: str | None = None,
) -> StatusView:
    """Pure: the row (plus what only a query knows) to the view."""
    base: dict[str, Any] = {"session_id": session.id or 0, "title": session.title,
                            "scheduling_class": scheduling_class.value, "operator_hold": operator_hold,
                            "cost_cap": session.cost_cap_usd}
    status = session.status
    if status == Status.ARCHIVED.value:
        record = (session.source or {}).get(STOPPED_KEY)
        return StatusView("archived", stopped=record if isinstance(record, dict) else None, **base)
    if status == Status.RUNNING.value:
        return StatusView("started", **base)
    if status == Status.DONE.value:
        return StatusView("done", **base)
    if status in (Status.FAILED.value, Status.BLOCKED.value):
        return StatusView("failed", why=error, **base)
    # The headline is `scheduler.rules.waiting`'s, the one ranking `why`, the queue and the API show.
    spot = scheduling_class is SchedulingClass.SPOT
    headline = waiting_reason(session, now, spot=spot).headline
    kind = headline.kind if headline is not None else None
    if status == Status.NEEDS_INPUT.value or kind in ("pause", "park", "sleep"):
        code = session.park_reason if kind == "park" else session.pause_reason or session.park_reason
        detail = None if kind == "park" else session.pause_detail
        why = detail or (render("text/reason_words.j2", reason=code) if code else None)  # words, never a code
        return StatusView("paused", why=why, until=session.wake_at if kind == "sleep" else None, **base)
    if headline is None:
        return StatusView("queued", position=position, queued=queued, **base) if spot else StatusView("queued", **base)
    if spot:
        return StatusView(
            "queued", position=position, queued=queued, why=headline.sentence, until=headline.retry_at, **base
        )
    if headline.reason == OVERTAKEN:  # a spot hold its promotion has overtaken: not held any more
        return StatusView("queued", why=headline.sentence, **base)
    return StatusView("held", why=headline.sentence, until=headline.retry_at, **base)


def read_status(db: DBSession, session_id: int, now: datetime) -> tuple[Where, StatusView] | None:
    """The view of one session, or None when it is gone or was not born of a GitHub issue."""
    session = db.get(Session, session_id)
    if session is None:
        return None
    where = where_of(session)
    if where is None:
        return None
    policy = load_policy(db)
    cls = class_of(session, policy)
    position = queued = None
    if session.status == Status.WAITING.value and cls is SchedulingClass.SPOT:
        position, queued = _spot_place(db, session, policy)
    hold = next((h for h in live_holds(db, now) if applies(h, session, now, policy)), None)
    on_hold = (hold.reason or f"held by {hold.armer}") if hold is not None else None
    error = None
    if session.status in (Status.FAILED.value, Status.BLOCKED.value):
        error = db.exec(select(Turn.error).where(Turn.session_id == session_id).order_by(col(Turn.id).desc())).first()
    view = status_view(session, cls, now, position=position, queued=queued, operator_hold=on_hold, error=error)
    spent = spent_by(db, session_id) if session.cost_cap_usd is not None else 0.0
    ending = standing_notice(db, session_id, now) if view.state == "started" else None
    progress = running_progress(db, [session_id], now).get(session_id) if view.state == "started" else None
    return where, replace(
        view, work=read_latest_result(db, session), spent=spent, ending=ending, progress=unmentioned(progress)
    )


def unmentioned(progress: dict[str, Any] | None) -> dict[str, Any] | None:
    """The agent's words with every "@" kept from mentioning anyone: a todo reading "ask @org/team"
    must not notify a team from the status comment each time it is edited."""
    if progress is None:
        return None

    def quiet(text: Any) -> Any:
        return text.replace("@", "@\u2060") if isinstance(text, str) else text

    todos = [{key: quiet(value) for key, value in todo.items()} for todo in progress.get("todos") or []
             if isinstance(todo, dict)]
    return {**progress, "tool": quiet(progress.get("tool")), "detail": quiet(progress.get("detail")), "todos": todos}


def render_body(view: StatusView) -> str:
    """The comment's markdown, marker first: the marker is how the comment is found again."""
    body = render(f"github/status_{view.state}.j2", view=view)
    if view.work is not None:
        output = view.work.output or view.work.error or ""
        shown = output[:RESULT_CHARS]
        body += "\n\n" + render(
            "github/_status_result.j2", view=view, work=view.work, output=shown, cut=len(output) - len(shown)
        )
    return f"{MARKER}\n{body}\n"


def _spot_place(db: DBSession, session: Session, policy: Any) -> tuple[int, int]:
    """(place, total) among waiting spot sessions, in the ranked queue's order: precedence, then
    age, then id. Two counts, so a long queue is not read row by row."""
    waiting_spot: list[Any] = [Session.status == Status.WAITING.value, class_expr(policy) == SchedulingClass.SPOT.value]
    total = db.exec(select(func.count()).select_from(Session).where(*waiting_spot)).one()
    ahead = db.exec(
        select(func.count()).select_from(Session).where(
            *waiting_spot,
            or_(
                col(Session.precedence) > session.precedence,
                and_(
                    col(Session.precedence) == session.precedence,
                    or_(
                        col(Session.created_at) < session.created_at,
                        and_(col(Session.created_at) == session.created_at, col(Session.id) < (session.id or 0)),
                    ),
                ),
            ),
        )
    ).one()
    return int(ahead) + 1, int(total)
