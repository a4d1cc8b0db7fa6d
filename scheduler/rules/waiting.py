"""Why is this waiting? One ranking every surface reads (seed 001, "Three parks, one headline").

Rules: the newest mechanism wins (the last one to fire put the session where it is now); a
mechanism with no usable stamp ranks below every one that has one; an overdue hold cannot be the
headline while another mechanism is present (the sweep that repairs a stalled ladder skips such a
session, so its promise would be false). Losing mechanisms are named, with why they lost.

A pause's own sentence (`banner`: why it is paused and what brings it back) is one template
every surface renders, the pause mechanism's among them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scheduler.rules.gate import RESUME_MARGIN_PCT
from templates import render

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
            why = (
                f"recorded {m.stamp:%Y-%m-%d %H:%M:%S UTC}, "
                f"before the {headline.kind} that put the session where it is now"
            )
        losers.append(Loser(m, why))
    return WaitingReason(headline, tuple(losers))


# The spot gate's own reasons: a record of one on a session that is no longer spot is a fossil.
SPOT_GATE_REASONS = frozenset({"at_utilization_limit", "fleet_at_cap"})
OVERTAKEN = "overtaken_by_class"


def _hold(s: Any, spot: bool | None, sentences: bool = True) -> Mechanism:
    if spot is False and s.hold_reason in SPOT_GATE_REASONS:
        # Seed 001, "A hold a promotion has overtaken": the class is the half that is true, so
        # the record is shown as overtaken — one sentence on every surface — never as a live hold.
        sentence = render("text/hold_overtaken.j2", reason=s.hold_reason, retry_at=s.hold_retry_at) if sentences else ""
        return Mechanism("hold", OVERTAKEN, s.hold_at, sentence, s.hold_retry_at, "the next queue pass")
    said = (s.hold_sentence or "") if sentences else ""
    return Mechanism("hold", s.hold_reason, s.hold_at, said, s.hold_retry_at, "its next re-check")


def banner(session: object, now: datetime) -> str:
    """Why this session is paused and what brings it back — one sentence for every surface.
    Duck-typed, like `mechanisms_of`: any row with the pause columns will do."""
    def get(name: str, default: Any = None) -> Any:
        return getattr(session, name, default)

    return render(
        "text/pause_banner.j2",
        reason=get("pause_reason"),
        detail=get("pause_detail") or "",
        status=get("status") or "",
        marked_at=get("preempt_mark_at"),
        by=get("preempted_by_id"),
        preemptions=get("preemption_count") or 0,
        resume_prompt=bool(get("pause_resume_prompt")),
        wake_at=get("wake_at") if get("wake_at") is not None and get("wake_at") > now else None,
        margin=RESUME_MARGIN_PCT,
    )


def mechanisms_of(
    session: object, now: datetime, *, spot: bool | None = None, sentences: bool = True
) -> list[Mechanism]:
    """The mechanisms recorded on a session row (duck-typed on scheduler.store.models.Session).
    `spot`: whether its class resolves to spot now (None when the caller does not know).
    `sentences` False: the reasons alone, no sentence rendered (the queue ladder's read)."""
    s: Any = session
    found: list[Mechanism] = []
    parked_on_hold = getattr(s, "park_reason", None) is not None and s.park_reason == getattr(s, "hold_reason", None)
    if getattr(s, "hold_reason", None) and not parked_on_hold:  # a park that keeps the turn is one mechanism
        found.append(_hold(s, spot, sentences))
    if getattr(s, "pause_reason", None):
        said = banner(s, now) if sentences else ""
        found.append(Mechanism("pause", s.pause_reason, s.pause_at, said, None, "the ceiling sweep's resume"))
    if getattr(s, "park_reason", None):
        owner = "the un-park sweep" if s.park_reason == "auth_outage" else "the queue hold's resume"
        found.append(
            Mechanism("park", s.park_reason, s.park_at, s.hold_sentence or "" if parked_on_hold and sentences else "",
                      None, owner)
        )
    return found


def waiting_reason(
    session: object, now: datetime, extra: Sequence[Mechanism] = (), *, spot: bool | None = None,
    sentences: bool = True,
) -> WaitingReason:
    """The headline for a session: a wake not yet reached outranks everything (nothing starts a
    session before it), then the ranking above over every other mechanism. Pass `spot` (its
    class resolved now) so a spot hold a promotion has overtaken is shown as such."""
    ranked = rank([*mechanisms_of(session, now, spot=spot, sentences=sentences), *extra], now)
    wake_at = getattr(session, "wake_at", None)
    if wake_at is not None and wake_at > now:
        sleep = Mechanism("sleep", "wake_me_up_later", None, "", wake_at, "its wake")
        others = (
            tuple(
                Loser(m, "a wall-clock sleep not yet reached outranks it")
                for m in ([ranked.headline] if ranked.headline else [])
            )
            + ranked.others
        )
        return WaitingReason(sleep, others)
    return ranked
