"""The values the turn engine passes around: a turn attempt, the unit of work it is decided in,
a block an admission check raises, and the answer an entry point gives.

    attempt = TurnAttempt(prompt, attachments, kind)        # what is asked to run
    work = Work(db, ctx, now, effects, reading)                  # one transaction deciding it
    submission = admit(work, session, attempt)              # started | held | queued | refused
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session as DBSession

from scheduler.context import Context
from scheduler.engine.effects import Effects
from scheduler.ports import QuotaReading
from scheduler.rules.gate import Decision

PASS_THROUGH = frozenset({"clone_only", "monitoring"})  # spend nothing: never gated
TURN_KINDS = frozenset(
    {"first", "follow_up", "wake", "poll", "restart", "nudge", "recovery", "resume", "human"} | PASS_THROUGH
)


@dataclass(frozen=True)
class TurnAttempt:
    """One prompt asked to run on a session: what a hold keeps, and what a start dispatches."""

    prompt: str | None
    attachments: Sequence[Mapping[str, Any]] = ()
    kind: str = "first"


@dataclass
class Work:
    """One transaction of the turn engine: the open database session, the context, the instant
    it decides at (read once), the quota reading it decides on, and the effects it applies after
    commit."""

    db: DBSession
    ctx: Context
    now: datetime
    effects: Effects = field(default_factory=Effects)
    reading: QuotaReading | None = None


@dataclass(frozen=True)
class Block:
    """An admission check beyond the gate said no (an operator hold, a queue hold, a busy
    concurrency group, a prerequisite). `retry_at` None means: the ladder decides."""

    reason: str
    sentence: str
    retry_at: datetime | None = None
    skip_only: bool = True  # True: later candidates may still run (no head-of-line blocking)
    park: bool = False  # the block parks the session: its park's owner resumes it, no re-check alarm


@dataclass(frozen=True)
class Submission:
    outcome: str  # started | held | queued | refused
    session_id: int
    turn_id: int | None = None
    reason: str | None = None
    sentence: str = ""
    retry_at: datetime | None = None
    decision: Decision | None = None


# A manual start is not the auto-queue. Seed 002: pressing Run "ignores position order,
# prerequisites, the interference check, the cost budget and a rate limit wait. Only the
# auto-queue honours those" — but never the one-run-per-group rule. StartNow marks its admission
# with `manual_start()`, and the checks that a person's press overrides read `is_manual()`.
_MANUAL: ContextVar[bool] = ContextVar("pacer_manual_start", default=False)


@contextmanager
def manual_start() -> Iterator[None]:
    """Mark the admissions inside as a person's direct start (StartNow)."""
    token = _MANUAL.set(True)
    try:
        yield
    finally:
        _MANUAL.reset(token)


def is_manual() -> bool:
    return _MANUAL.get()
