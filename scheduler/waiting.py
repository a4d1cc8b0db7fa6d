"""Why is this waiting? One ranking every surface reads (seed 001, "Three parks, one headline").

Rules: the newest mechanism wins (the last one to fire put the session where it is now); a
mechanism with no usable stamp ranks below every one that has one; an overdue hold cannot be the
headline while another mechanism is present (the sweep that repairs a stalled ladder skips such a
session, so its promise would be false). Losing mechanisms are named, with why they lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

OVERDUE = timedelta(minutes=10)


@dataclass(frozen=True)
class Mechanism:
    kind: str  # hold | pause | park | sleep | operator_hold | queue_hold | prerequisite | group
    reason: str
    stamp: datetime | None
    sentence: str = ""
    retry_at: datetime | None = None
    owner: str = ""  # what resumes it


@dataclass(frozen=True)
class Loser:
    mechanism: Mechanism
    why: str


@dataclass(frozen=True)
class WaitingReason:
    headline: Mechanism | None
    others: tuple[Loser, ...] = ()


def _overdue(m: Mechanism, now: datetime) -> bool:
    return m.kind == "hold" and m.retry_at is not None and now - m.retry_at > OVERDUE


def rank(mechanisms: Sequence[Mechanism], now: datetime) -> WaitingReason:
    present = list(mechanisms)
    if not present:
        return WaitingReason(None)
    eligible = [m for m in present if not (_overdue(m, now) and len(present) > 1)]
    if not eligible:
        eligible = present

    def key(m: Mechanism) -> tuple[int, float]:
        return (1, m.stamp.timestamp()) if m.stamp is not None else (0, 0.0)

    headline = max(eligible, key=key)
    losers = []
    for m in present:
        if m is headline:
            continue
        if _overdue(m, now) and len(present) > 1:
            why = "an overdue hold is not the reason while another mechanism holds the session: the hold sweep skips it"
        elif m.stamp is None:
            why = "it carries no usable timestamp, so it ranks below every mechanism that has one"
        else:
            why = f"recorded {m.stamp:%Y-%m-%d %H:%M:%S UTC}, before the {headline.kind} that put the session where it is now"
        losers.append(Loser(m, why))
    return WaitingReason(headline, tuple(losers))


def mechanisms_of(session: object, now: datetime) -> list[Mechanism]:
    """The mechanisms recorded on a session row (duck-typed on scheduler.models.Session)."""
    s = session
    found: list[Mechanism] = []
    if getattr(s, "hold_reason", None):
        found.append(Mechanism("hold", s.hold_reason, s.hold_at, s.hold_sentence or "", s.hold_retry_at, "its re-check on the hold ladder"))  # type: ignore[attr-defined]
    if getattr(s, "pause_reason", None):
        from scheduler.pause import banner  # why it is paused and what brings it back, one template

        found.append(Mechanism("pause", s.pause_reason, s.pause_at, banner(s, now), None, "the ceiling sweep's resume"))  # type: ignore[attr-defined]
    if getattr(s, "park_reason", None):
        found.append(Mechanism("park", s.park_reason, s.park_at, "", None, "the queue hold's resume"))  # type: ignore[attr-defined]
    return found


def waiting_reason(session: object, now: datetime, extra: Sequence[Mechanism] = ()) -> WaitingReason:
    """The headline for a session: a wake not yet reached outranks everything (nothing starts a
    session before it), then the ranking above over every other mechanism."""
    ranked = rank([*mechanisms_of(session, now), *extra], now)
    wake_at = getattr(session, "wake_at", None)
    if wake_at is not None and wake_at > now:
        sleep = Mechanism("sleep", "wake_me_up_later", None, "", wake_at, "its wake")
        others = tuple(Loser(m, "a wall-clock sleep not yet reached outranks it") for m in ([ranked.headline] if ranked.headline else [])) + ranked.others
        return WaitingReason(sleep, others)
    return ranked
