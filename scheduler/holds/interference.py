"""Blocked work is not stepped on (seed 002, "How the queue picks the next task"): a candidate
whose text overlaps a blocked session's in the same concurrency group is skipped, because it
would likely touch work that session left half-done in the shared working tree. When every
candidate of a group overlaps, the group holds with the blocked-interference reason, naming the
blocked session by its title and saying to answer, retry or close it. No Resume: it would
re-apply at once; unblocking the named session moves the queue.

Blocked here is what prerequisites also treat as work left half-done: a session stopped by a
failure, `blocked` (credits, six failures in a row) or `failed` (an error a retry cannot fix).
Starting it again, or archiving it, ends the interference. Sessions in no group share no tree
and never interfere. A person's press (start now) is not gated by it, as the seed says.

The overlap rule (`overlaps`, pure; a session's text is its title, its first prompt and the
prompt of the turn it holds):

    1. Both name the same file path: a word with a "/" between name characters
       (`src/auth/login.py`, `docs/`), or a file name with an extension (`login.py`),
       compared in lower case without a leading "./"; links (`https://…`) are not paths.
    2. Or they share at least MIN_SHARED significant words — words outside the paths, lower
       case, at least MIN_WORD_CHARS letters or digits, not in STOPWORDS — and the shared words
       are at least half of the significant words of the text that has fewer.

Either is enough; two texts with no significant word in common never overlap.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.context import Context
from scheduler.engine.attempt import Block, is_manual
from scheduler.engine.effects import Effects
from scheduler.holds import queue as queue_holds
from scheduler.store.db import core, session_scope
from scheduler.store.hold_reads import any_queue_holds
from scheduler.store.models import Session, Status
from scheduler.store.session_rows import blocked_sessions_of_group
from templates import render

REASON = queue_holds.BLOCKED_INTERFERENCE
BLOCKING = (Status.BLOCKED.value, Status.FAILED.value)
MIN_SHARED = 2
MIN_WORD_CHARS = 4
TEXT_CHARS = 20_000  # of a prompt read for the rule: an overlap shows in its opening
STOPWORDS = frozenset(
    {
        "about", "above", "after", "again", "also", "because", "been", "before", "being", "below", "between", "both",
        "could", "does", "doing", "down", "each", "from", "further", "have", "having", "here", "into", "itself",
        "just", "more", "most", "must", "only", "other", "over", "please", "same", "should", "some", "such", "than",
        "that", "their", "them", "then", "there", "these", "they", "this", "those", "through", "under", "until",
        "very", "what", "when", "where", "which", "while", "will", "with", "would", "your", "make", "sure", "need",
        "want", "like", "using", "used",
    }
)

_PATH = re.compile(r"(?:\./)?[\w.-]*\w/[\w./-]*|[\w-]+\.[A-Za-z][A-Za-z0-9]{0,7}\b")
_WORD = re.compile(r"[^\W_]+")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)  # a link names a page, not a file


def paths(text: str) -> frozenset[str]:
    """The file paths a text names, normalised (lower case, no leading "./" or trailing ".")."""
    found = (m.group(0).lower().removeprefix("./").rstrip(".") for m in _PATH.finditer(_URL.sub(" ", text)))
    return frozenset(path for path in found if path)


def words(text: str) -> frozenset[str]:
    """The significant words of a text outside its paths: lower case, MIN_WORD_CHARS or more,
    no stopwords. Two different files of one folder share the folder's name, not their work."""
    prose = _PATH.sub(" ", _URL.sub(" ", text))
    return frozenset(
        w
        for w in (m.group(0).lower() for m in _WORD.finditer(prose))
        if len(w) >= MIN_WORD_CHARS and w not in STOPWORDS
    )


def overlaps(text: str, other: str) -> bool:
    """Whether two sessions' texts overlap by the rule above."""
    if paths(text) & paths(other):
        return True
    mine, theirs = words(text), words(other)
    shared = len(mine & theirs)
    return shared >= MIN_SHARED and shared * 2 >= min(len(mine), len(theirs))


def session_text(title: str, prompt: str) -> str:
    return f"{title}\n{prompt[:TEXT_CHARS]}"


# --------------------------------------------------------------------------- the store


@dataclass(frozen=True)
class BlockedSession:
    """A blocked session as the rule and its sentence need it."""

    id: int
    title: str
    status: str
    text: str


def blocked_in(db: DBSession, group: str) -> list[BlockedSession]:
    """The blocked and failed sessions of one group, oldest first."""
    stmt = (
        sa_select(col(Session.id), col(Session.title), col(Session.status), col(Session.prompt))
        .where(col(Session.concurrency_group) == group, col(Session.status).in_(BLOCKING))
        .order_by(col(Session.id))
    )
    return [
        BlockedSession(int(i), str(t or ""), str(s), session_text(str(t or ""), str(p or "")))
        for i, t, s, p in core(db, stmt)
    ]


def interfering(db: DBSession, session: Session) -> BlockedSession | None:
    """The first blocked session of `session`'s group whose text overlaps its own, or None."""
    group = session.concurrency_group
    if not group:
        return None
    blocked = blocked_sessions_of_group(db, group, lambda: blocked_in(db, group))
    if not blocked:
        return None
    held = session.hold_prompt if session.hold_prompt and session.hold_prompt != session.prompt else ""
    mine = session_text(session.title, f"{session.prompt}\n{held}")
    return next((b for b in blocked if b.id != session.id and overlaps(mine, b.text)), None)


def admission_check(ctx: Context) -> Callable[[DBSession, Session, datetime], Block | None]:
    def interference_check(db: DBSession, session: Session, now: datetime) -> Block | None:
        if is_manual():  # a person's press is not gated by the interference check (seed 002)
            return None
        found = interfering(db, session)
        if found is None:
            return None
        return Block(
            REASON, render("text/interference_block.j2", blocked=found, group=session.concurrency_group), skip_only=True
        )

    return interference_check


# --------------------------------------------------------------------------- the group-level hold


NAMED_IN_HOLD = 3  # blocked sessions a group's hold names before "and N more"
READ_PER_GROUP = 50  # held candidates of a group read to name what they overlap


def _candidates() -> tuple[Any, ...]:
    """The sessions a queue pass examines: waiting with a held turn, not paused, parked or asleep.
    Their recorded hold reason is the last admission's verdict."""
    return (
        Session.status == Status.WAITING.value,
        col(Session.hold_reason).is_not(None),
        col(Session.pause_reason).is_(None),
        col(Session.park_reason).is_(None),
    )


def _awake(now: datetime) -> Any:
    return or_(col(Session.wake_at).is_(None), col(Session.wake_at) <= now)


def groups_held(db: DBSession, now: datetime) -> dict[str, list[BlockedSession]]:
    """The groups whose every candidate overlaps a blocked session, each with those sessions."""
    base = (*_candidates(), _awake(now), col(Session.concurrency_group).is_not(None))
    interfered = set(
        db.exec(select(Session.concurrency_group).where(*base, Session.hold_reason == REASON).distinct()).all()
    )
    if not interfered:
        return {}
    others = set(db.exec(select(Session.concurrency_group).where(*base, Session.hold_reason != REASON,
                                                                   col(Session.concurrency_group).in_(interfered)).distinct()).all())
    held: dict[str, list[BlockedSession]] = {}
    for group in sorted(str(g) for g in interfered - others):
        stmt = select(Session).where(*base, Session.concurrency_group == group, Session.hold_reason == REASON)
        named: dict[int, BlockedSession] = {}
        for waiter in db.exec(stmt.order_by(col(Session.id)).limit(READ_PER_GROUP)):
            if (found := interfering(db, waiter)) is not None:
                named.setdefault(found.id, found)
        if named:
            held[group] = sorted(named.values(), key=lambda b: b.id)
    return held


def hold_sentence(group: str, blocked: list[BlockedSession]) -> str:
    return render("text/queue_hold_blocked_interference.j2", group=group, blocked=blocked[:NAMED_IN_HOLD],
                  more=max(len(blocked) - NAMED_IN_HOLD, 0))


def reconcile(ctx: Context) -> None:
    """Record, update or lift each group's blocked-interference hold (announced once when new)."""
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        reconcile_in(db, now, effects)
    effects.apply(ctx)


def reconcile_in(db: DBSession, now: datetime, effects: Effects) -> None:
    """`reconcile` inside the caller's transaction (`holds.sweep.report_derived`)."""
    blocking = (col(Session.status).in_(BLOCKING), col(Session.concurrency_group).is_not(None))
    any_blocked = db.exec(select(Session.id).where(*blocking).limit(1)).first()
    if any_blocked is None and not any_queue_holds(db):
        return  # nothing blocked that could interfere, no hold to lift
    held = groups_held(db, now) if any_blocked is not None else {}
    for hold in queue_holds.in_force(db, now):
        if hold.reason == REASON and hold.group not in held:
            queue_holds.release(db, hold, now, by="the blocked work was answered, retried or closed", effects=effects)
    for group, blocked in held.items():
        live = queue_holds.live_hold(db, group, now)
        if live is not None and live.reason != REASON:
            continue  # a real hold on the group is the reason; its sessions carry it
        detail = {"blocked": [b.id for b in blocked], "titles": [b.title for b in blocked]}
        queue_holds.record(
            db, effects, queue_holds.NewHold(group, REASON, hold_sentence(group, blocked), detail=detail), now
        )
