"""Rows and results as the API shows them: plain dicts matching `bot.api.models`.

A held submission carries the gate's two sentences (why, and until when) from the same
templates every surface renders; a session's waiting reason is `scheduler.rules.waiting`'s ranking.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import Request
from sqlalchemy import func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.api.guard import ApiError
from bot.chat import ladder_view
from scheduler.front import (
    STOPPED_KEY,
    Context,
    EnqueuedMessage,
    Mechanism,
    PolicyView,
    Session,
    StartNowResult,
    Status,
    Submission,
    explain,
    forecast_of,
    is_spot,
    running_progress,
    session_view,
    spent_by,
    waiting_reason,
)
from templates import error_text, render


def context(request: Request) -> Context:
    """The scheduler Context of the running Pacer."""
    pacer = request.app.state.pacer
    ctx = getattr(pacer, "ctx", None) or pacer.extras.get("scheduler_context")
    if ctx is None:
        raise ApiError(503, "unavailable", error_text("api/scheduler_not_running"))
    return ctx  # type: ignore[no-any-return]


def _mechanism(m: Mechanism) -> dict[str, Any]:
    return {
        "kind": m.kind,
        "reason": m.reason,
        "stamp": m.stamp,
        "sentence": m.sentence,
        "retry_at": m.retry_at,
        "owner": m.owner,
    }


def session_detail(
    db: DBSession, session: Session, policy: PolicyView, now: datetime, extra: list[Mechanism] | None = None
) -> dict[str, Any]:
    out = session_view(session, policy, spent_by(db, session.id or 0))
    reason = waiting_reason(session, now, extra or [], spot=is_spot(session, policy))
    waiting = None
    if reason.headline is not None:
        waiting = {
            "headline": _mechanism(reason.headline),
            "others": [{**_mechanism(loser.mechanism), "why_not_headline": loser.why} for loser in reason.others],
        }
    queued = db.exec(
        select(func.count()).select_from(EnqueuedMessage).where(
            EnqueuedMessage.session_id == session.id, col(EnqueuedMessage.delivered_at).is_(None)
        )
    ).one()
    out.update(
        prompt=session.prompt,
        waiting=waiting,
        hold=None if session.hold_reason is None else {
            "reason": session.hold_reason, "count": session.hold_count, "at": session.hold_at,
            "retry_at": session.hold_retry_at, "sentence": session.hold_sentence,
        },
        pause=None if session.pause_reason is None else {
            "reason": session.pause_reason, "at": session.pause_at, "detail": session.pause_detail,
            "paused_by": session.paused_by,
        },
        park=None if session.park_reason is None else {"reason": session.park_reason, "at": session.park_at},
        wake_at=session.wake_at,
        queued_messages=int(queued),
        stopped=_stopped(session),
        progress=progress_out(running_progress(db, [session.id or 0], now).get(session.id or 0)),
        forecast=forecast_out(db, session, now),
    )
    return out


def progress_out(progress: dict[str, Any] | None) -> dict[str, Any] | None:
    """A running turn's progress (`running_progress`) as `ProgressOut`."""
    if progress is None:
        return None
    keys = ("turn_id", "tool", "detail", "tools_used", "started_at", "progress_at", "elapsed_s", "cost_usd")
    todos = [{"content": t.get("content"), "status": t.get("status"), "active_form": t.get("active_form")}
             for t in progress.get("todos") or [] if isinstance(t, dict)]
    return {**{key: progress.get(key) for key in keys}, "todos": todos if progress.get("todos") is not None else None}


def forecast_out(db: DBSession, session: Session, now: datetime) -> dict[str, Any] | None:
    """A waiting session's kept forecast (`scheduler.store.forecast_rows`) as `ForecastOut`."""
    found = forecast_of(db, session.id or 0) if session.status == Status.WAITING.value else None
    if found is None:
        return None
    return {"expected_start": found.median, "earliest": found.low, "latest": found.high,
            "computed_at": found.computed_at, "draws": found.draws,
            "sentence": render("text/forecast.j2", forecast=found, now=now)}


def ladder_out(selected: ladder_view.Selected | None) -> dict[str, Any] | None:
    """A waiter's bounded queue ladder (`bot.chat.ladder_view.selected`) as `LadderOut`."""
    if selected is None:
        return None
    steps = [
        {"gap": step} if isinstance(step, int) else
        {"place": step.place, "session_id": step.id, "title": step.title, "parked": step.parked, "group": step.group,
         "badges": list(step.badges), "selected": step.selected}
        for step in selected.steps
    ]
    return {"position": selected.position, "of": selected.total, "ahead": selected.ahead, "parked": selected.parked,
            "steps": steps}


def submission_out(sub: Submission, now: datetime) -> dict[str, Any]:
    why = until = None
    if sub.outcome in ("held", "refused"):
        if sub.decision is not None and sub.decision.held:
            text = explain(sub.decision, now)
            why, until = text.why, text.until
        else:  # an admission check (operator hold, group, prerequisite) or a retry said no
            why = sub.sentence or sub.reason
    elif sub.outcome == "queued":
        why = render("text/submission_queued.j2", reason=sub.reason)
    return {
        "outcome": sub.outcome,
        "reason": str(sub.reason) if sub.reason is not None else None,
        "why": why,
        "until": until,
        "retry_at": sub.retry_at,
        "turn_id": sub.turn_id,
    }


def start_now_out(result: StartNowResult, now: datetime) -> dict[str, Any]:
    return {
        "shape": result.shape,
        "sentence": result.sentence,
        "submission": submission_out(result.submission, now) if result.submission is not None else None,
    }


def _stopped(session: Session) -> dict[str, Any] | None:
    """The record `scheduler.engine.lifecycle.stop` keeps on an archived session's source."""
    record = (session.source or {}).get(STOPPED_KEY) if session.status == Status.ARCHIVED.value else None
    return record if isinstance(record, dict) else None
