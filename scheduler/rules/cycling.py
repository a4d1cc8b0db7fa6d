"""Preemption cycling: a session that keeps losing its slot, or two that keep taking it from
each other. Pure: a snapshot of the preemption ledger and `now` in, the report out.

    a cycling session   preempted at least SESSION_PREEMPTIONS times within WINDOW
    a cycling pair      at least PAIR_DISPLACEMENTS preemptions between the same two sessions
                        within WINDOW, whichever way each went (`mutual` when both ways)

The cooldown (`preemption.COOLDOWN`) stops a session yielding twice inside half an hour, so
three times in a day is a session that resumes only to be taken again, and twice by the same
other session is a slot changing hands back and forth. The cost lost is what the halted turns
had spent: a victim whose turn ended by itself before its grace ran out lost nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

WINDOW = timedelta(hours=24)
SESSION_PREEMPTIONS = 3
PAIR_DISPLACEMENTS = 2


@dataclass(frozen=True)
class Event:
    """One charged preemption: `session_id` yielded its slot to `by_id`."""

    session_id: int
    by_id: int | None
    at: datetime
    halted: bool = False  # its turn was halted past the grace, rather than ending by itself
    cost_lost_usd: float = 0.0  # what the halted turn had spent
    title: str = ""
    by_title: str = ""


@dataclass(frozen=True)
class CyclingSession:
    session_id: int
    title: str
    preemptions: int  # within the window
    halted: int  # of those, how many halted a turn
    cost_lost_usd: float
    by: tuple[int, ...]  # the sessions that took its slot, first taker first
    last_at: datetime


@dataclass(frozen=True)
class CyclingPair:
    first_id: int  # the lower id
    first_title: str
    second_id: int
    second_title: str
    first_yielded: int  # times the first gave its slot to the second
    second_yielded: int
    cost_lost_usd: float
    last_at: datetime

    @property
    def displacements(self) -> int:
        return self.first_yielded + self.second_yielded

    @property
    def mutual(self) -> bool:
        return self.first_yielded > 0 and self.second_yielded > 0


@dataclass(frozen=True)
class Cycling:
    since: datetime
    until: datetime
    sessions: tuple[CyclingSession, ...] = ()
    pairs: tuple[CyclingPair, ...] = ()
    preemptions: int = 0  # every preemption in the window, cycling or not
    cost_lost_usd: float = 0.0  # lost by the cycling sessions' and pairs' preemptions
    window_cost_lost_usd: float = 0.0  # lost by every preemption in the window

    @property
    def empty(self) -> bool:
        return not (self.sessions or self.pairs)


def detect(events: Iterable[Event], now: datetime, window: timedelta = WINDOW) -> Cycling:
    """The sessions and pairs cycling at `now`, from the events in (now - window, now]."""
    since = now - window
    inside = sorted((e for e in events if since < e.at <= now), key=lambda e: (e.at, e.session_id))
    by_session: dict[int, list[Event]] = defaultdict(list)
    by_pair: dict[tuple[int, int], list[Event]] = defaultdict(list)
    for event in inside:
        by_session[event.session_id].append(event)
        if event.by_id is not None and event.by_id != event.session_id:
            by_pair[_key(event)].append(event)
    sessions = [_session(sid, got) for sid, got in by_session.items() if len(got) >= SESSION_PREEMPTIONS]
    pairs = [_pair(key, got) for key, got in by_pair.items() if len(got) >= PAIR_DISPLACEMENTS]
    counted = {id(e) for s in sessions for e in by_session[s.session_id]}
    counted |= {id(e) for p in pairs for e in by_pair[(p.first_id, p.second_id)]}
    return Cycling(
        since=since,
        until=now,
        sessions=tuple(sorted(sessions, key=lambda s: (-s.preemptions, -s.cost_lost_usd, s.session_id))),
        pairs=tuple(sorted(pairs, key=lambda p: (-p.displacements, -p.cost_lost_usd, p.first_id, p.second_id))),
        preemptions=len(inside),
        cost_lost_usd=round(sum(e.cost_lost_usd for e in inside if id(e) in counted), 6),
        window_cost_lost_usd=round(sum(e.cost_lost_usd for e in inside), 6),
    )


def _key(event: Event) -> tuple[int, int]:
    assert event.by_id is not None
    return (min(event.session_id, event.by_id), max(event.session_id, event.by_id))


def _session(session_id: int, events: list[Event]) -> CyclingSession:
    takers = tuple(dict.fromkeys(e.by_id for e in events if e.by_id is not None))
    return CyclingSession(
        session_id=session_id,
        title=events[-1].title,
        preemptions=len(events),
        halted=sum(1 for e in events if e.halted),
        cost_lost_usd=round(sum(e.cost_lost_usd for e in events), 6),
        by=takers,
        last_at=events[-1].at,
    )


def _pair(key: tuple[int, int], events: list[Event]) -> CyclingPair:
    first, second = key
    titles: dict[int, str] = {}
    for e in events:
        titles[e.session_id] = e.title
        if e.by_id is not None:
            titles[e.by_id] = e.by_title
    return CyclingPair(
        first_id=first,
        first_title=titles.get(first, ""),
        second_id=second,
        second_title=titles.get(second, ""),
        first_yielded=sum(1 for e in events if e.session_id == first),
        second_yielded=sum(1 for e in events if e.session_id == second),
        cost_lost_usd=round(sum(e.cost_lost_usd for e in events), 6),
        last_at=events[-1].at,
    )
