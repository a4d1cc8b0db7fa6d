"""What the live page says of each session it lists, beside the queue's own row: who asked, where
(the issue, the pull request or the Slack thread), how long since it was asked, when its running
turn started, and what its turns have cost so far; and the sessions that finished in the last day.

    `facts_of(db, ids)`               one read for the sessions listed: their rows' few columns and
                                      a sum over their turns (the cost `turn_reads.spent_by` gives:
                                      a running turn counts 0 until it reports)
    `finished_since(db, since, now)`  done, failed, blocked and archived sessions whose end falls in
                                      the span, newest first, each with its facts and, for a failed
                                      one, its latest turn's error
    `links(source)`                   pure: where a session was asked and where its work went

A link names its kind, never its words: the page's templates say "pull request #12".
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.store.models import Session, Status, Turn

DAY = timedelta(hours=24)
FINISHED_ROWS = 30
FINISHED = (Status.DONE.value, Status.FAILED.value, Status.BLOCKED.value, Status.ARCHIVED.value)
ERROR_CHARS = 200
SLACK_CHANNEL = "https://slack.com/app_redirect?channel={channel}"  # Slack's documented deep link to a channel


@dataclass(frozen=True)
class Link:
    kind: str  # issue | pull_request (the one it was asked on) | work_pull_request (its work's) | slack_thread
    url: str
    repository: str = ""
    number: int | None = None
    channel: str = ""


@dataclass(frozen=True)
class SessionFacts:
    id: int
    requester: str | None
    links: tuple[Link, ...]
    created_at: datetime
    started_at: datetime | None  # its first turn's start
    ended_at: datetime | None  # when it finished, failed or was archived
    turn_started_at: datetime | None  # the running turn's start, while one runs
    spent: float  # its turns' recorded cost
    turns: int

    def elapsed(self, now: datetime) -> timedelta:
        """From the ask to its end, or to now while it is still open."""
        return max((self.ended_at or now) - self.created_at, timedelta(0))


@dataclass(frozen=True)
class FinishedRow:
    id: int
    title: str
    status: str
    genesis: str
    facts: SessionFacts
    error: str | None  # a failed or blocked session's latest error, cut to ERROR_CHARS


def _web(url: Any) -> str | None:
    return url if isinstance(url, str) and url.startswith(("https://", "http://")) else None


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def links(source: Mapping[str, Any] | None) -> tuple[Link, ...]:
    """The issue or pull request it was asked on, the pull request its work opened, its Slack thread."""
    source = source if isinstance(source, Mapping) else {}
    found: list[Link] = []
    asked_on = _web(source.get("url"))
    if asked_on is not None:
        kind = "pull_request" if source.get("is_pull_request") or "/pull/" in asked_on else "issue"
        found.append(Link(kind, asked_on, str(source.get("repository") or ""), _number(source.get("number"))))
    workspace = source.get("workspace")
    pull = workspace.get("pull_request") if isinstance(workspace, Mapping) else None
    if isinstance(pull, Mapping) and (opened := _web(pull.get("url"))) is not None and opened != asked_on:
        found.append(Link("work_pull_request", opened, number=_number(pull.get("number"))))
    slack = source.get("slack")
    channel = slack.get("channel") if isinstance(slack, Mapping) else None
    if isinstance(channel, str) and channel.isalnum():
        # The thread's own link when its workspace was known at intake; else the channel's.
        thread = _web(slack.get("url")) if isinstance(slack, Mapping) else None
        found.append(Link("slack_thread", thread or SLACK_CHANNEL.format(channel=channel), channel=channel))
    return tuple(found)


def _ended(session: Session) -> datetime | None:
    if session.status not in FINISHED:
        return None
    return session.finished_at or session.updated_at  # an archive stamps updated_at


def facts_of(db: DBSession, ids: Collection[int]) -> dict[int, SessionFacts]:
    """The facts of each session in `ids` (absent ids are left out): three reads, however many."""
    if not ids:
        return {}
    wanted = list(ids)
    sessions = db.exec(select(Session).where(col(Session.id).in_(wanted))).all()
    totals = {
        int(sid): (float(cost), int(n))
        for sid, cost, n in db.exec(
            select(Turn.session_id, func.coalesce(func.sum(Turn.cost_usd), 0.0), func.count())
            .where(col(Turn.session_id).in_(wanted))
            .group_by(col(Turn.session_id))
        )
    }
    running = {
        int(sid): at
        for sid, at in db.exec(
            select(Turn.session_id, func.max(Turn.started_at))
            .where(col(Turn.session_id).in_(wanted), Turn.status == "running")
            .group_by(col(Turn.session_id))
        )
    }
    out: dict[int, SessionFacts] = {}
    for s in sessions:
        assert s.id is not None
        spent, turns = totals.get(s.id, (0.0, 0))
        out[s.id] = SessionFacts(
            id=s.id, requester=s.requester, links=links(s.source), created_at=s.created_at, started_at=s.started_at,
            ended_at=_ended(s), turn_started_at=running.get(s.id), spent=spent, turns=turns,
        )
    return out


def finished_since(
    db: DBSession, now: datetime, span: timedelta = DAY, limit: int = FINISHED_ROWS
) -> list[FinishedRow]:
    """The sessions that ended in the `span` before `now`, newest first, at most `limit`; Pacer's own
    bookkeeping is on no list a person reads."""
    since = now - span
    ended = func.coalesce(Session.finished_at, Session.updated_at)
    rows = db.exec(
        select(Session)
        .where(col(Session.status).in_(FINISHED), ended >= since, ended <= now, col(Session.bookkeeping).is_(False))
        .order_by(ended.desc(), col(Session.id).desc())
        .limit(limit)
    ).all()
    ids = [s.id for s in rows if s.id is not None]
    facts = facts_of(db, ids)
    failed = [s.id for s in rows if s.status in (Status.FAILED.value, Status.BLOCKED.value)]
    errors: dict[int, str] = {}
    if failed:
        latest = (
            select(Turn.session_id, Turn.error)
            .where(col(Turn.session_id).in_(failed), col(Turn.error).is_not(None))
            .order_by(col(Turn.id).desc())
        )
        for sid, error in db.exec(latest):
            errors.setdefault(int(sid), str(error)[:ERROR_CHARS])
    return [
        FinishedRow(id=s.id, title=s.title, status=s.status, genesis=s.genesis, facts=facts[s.id],
                    error=errors.get(s.id))
        for s in rows
        if s.id is not None and s.id in facts
    ]
