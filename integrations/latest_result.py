"""A session's latest result, as people read it wherever the work was asked: the last finished
turn's output (the agent's final message) or error, its cost and duration, the session's turns
and spend, and where its work went (branch, pull request, a rejected push: the record
`integrations.runners.workspace` keeps on `source["workspace"]`). The GitHub status comment and
the Slack thread both show this, so they cannot say different things.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.store.models import Session, Turn


@dataclass(frozen=True)
class LatestResult:
    """The latest finished turn and where its work went."""

    output: str
    error: str | None
    cost_usd: float
    duration_ms: int | None
    turns: int
    cost_total_usd: float
    branch: str | None = None
    branch_url: str | None = None
    pull_request_number: int | None = None
    pull_request_url: str | None = None
    push_error: str | None = None
    disk_bytes: int | None = None  # what the session's worktree used after its latest turn


def read_latest_result(db: DBSession, session: Session) -> LatestResult | None:
    """The latest finished turn of the session with its totals and links; None before the first."""
    finished = select(Turn).where(Turn.session_id == session.id, col(Turn.finished_at).is_not(None))
    latest = db.exec(finished.order_by(col(Turn.finished_at).desc(), col(Turn.id).desc())).first()
    if latest is None:
        return None
    turns, total = db.exec(
        select(func.count(), func.coalesce(func.sum(Turn.cost_usd), 0.0)).where(
            Turn.session_id == session.id, col(Turn.finished_at).is_not(None)
        )
    ).one()
    source = session.source if isinstance(session.source, dict) else {}
    found = source.get("workspace")
    record: dict[str, Any] = found if isinstance(found, dict) else {}
    pull: dict[str, Any] = record["pull_request"] if isinstance(record.get("pull_request"), dict) else {}
    branch = record.get("branch") if isinstance(record.get("branch"), str) else None
    pages = str(source.get("url") or "").split("/issues/")[0].split("/pull/")[0]  # https://github.com/owner/name
    return LatestResult(
        output=latest.output or "", error=latest.error, cost_usd=latest.cost_usd, duration_ms=latest.duration_ms,
        turns=int(turns), cost_total_usd=float(total), branch=branch,
        branch_url=f"{pages}/tree/{branch}" if branch and pages.startswith("http") else None,
        pull_request_number=pull.get("number"), pull_request_url=pull.get("url"), push_error=record.get("push_error"),
        disk_bytes=record.get("disk_bytes") if isinstance(record.get("disk_bytes"), int) else None,
    )
