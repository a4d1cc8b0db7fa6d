"""What the live page shows, read once per request from the read models every other surface uses:
the gate card (`scheduler.steering.gate_card`, as `/pacer policy` and GET /api/v1/policy), the ranked
queue (`bot.chat.queue_view`, as `/pacer queue`), every hold (`scheduler.holds.view`, as `/pacer
holds`, with the preemption cycling report), the burn-rate table (`scheduler.steering.burn_view`, as
`/pacer burn`), the last day's marks (`scheduler.steering.timeline`), the early notices the running
sessions were given (`scheduler.pauses.budget_notice`, as their Slack thread and GitHub comment say
them), and, for each session listed, who asked, where, since when and its cost so far, with the
sessions that ended in the last day (`scheduler.steering.session_facts`), and what the agent of
each running session is doing now (`scheduler.store.turn_reads.running_progress`: live
progress). The only numbers made here are the chart's points, drawn from the gate's own window figures.

The queue here shows the open sessions (waiting, running, needing input); a failed one is listed
with the day's finished sessions, and one older than a day only in `/pacer queue`.

Each window's chart runs from the window's start to its reset, in the window's unit (dollars once
calibrated, a fraction before):

    pacing curve      the spot budget spent evenly over the whole window, 0 at its start
    sustainable path  from the spend now to the spot budget at the reset: the gate's
                      sustainable rate (spot left / minutes left) drawn as a line
    fleet projection  from the spend now at the fleet's present burn, until the reset
    reserve line      the spot budget: above it is the priority reserve
    spent             the quota reading now (the source keeps no history, so one point)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.chat import ladder_view, queue_view
from bot.chat.gate_view import current_card
from bot.runtime.process import Pacer
from scheduler.front import (
    ACTIVE_STATUSES,
    BurnRate,
    FinishedRow,
    GateCard,
    HoldsView,
    SessionFacts,
    StandingNotice,
    Timeline,
    WindowFigures,
    all_holds,
    burn_rows,
    facts_of,
    finished_since,
    last_day,
    load_policy,
    render_card,
    running_progress,
    standing_notices,
)

QUEUE_ROWS = 50
HELD_ROWS = 30
FINISHED_ROWS = 30
LENGTHS = {"5h": timedelta(hours=5), "7d": timedelta(days=7)}


@dataclass(frozen=True)
class LiveView:
    now: datetime
    card: GateCard
    card_text: str
    queue: queue_view.QueueView
    holds: HoldsView
    timeline: Timeline
    burn: list[BurnRate]
    facts: dict[int, SessionFacts]  # of every session the queue lists
    finished: list[FinishedRow]  # ended in the last day, newest first
    notices: list[StandingNotice]  # the early notice each running session was given, in force
    selected: ladder_view.Selected | None = None  # the bounded queue ladder of the waiter picked (`?waiter=<id>`)
    # What the agent of each running session listed is doing (`running_progress`), by session id.
    progress: dict[int, dict[str, Any]] = field(default_factory=dict)

    def charts(self) -> list[dict[str, Any]]:
        return [window_chart(w, self.now) for w in self.card.decision.windows]


def read(pacer: Pacer, waiter: int | None = None) -> LiveView:
    now = pacer.clock.now()
    card = current_card(pacer, now)  # reads the quota before its own transaction
    with pacer.db() as db:
        queue = queue_view.build(
            db, load_policy(db), scheduling_class=None, genesis=None, every_status=False, limit=QUEUE_ROWS, now=now,
            statuses=[s.value for s in ACTIVE_STATUSES],
        )
        selected = None if waiter is None or queue.ladder is None else ladder_view.selected(db, queue.ladder, waiter)
        holds = all_holds(db, now, session_rows=HELD_ROWS)
        timeline = last_day(db, now)
        facts = facts_of(db, [row.id for row in queue.rows])
        finished = finished_since(db, now, limit=FINISHED_ROWS)
        notices = standing_notices(db, now)
        progress = running_progress(db, [row.id for row in queue.rows if row.status == "running"], now)
    return LiveView(now=now, card=card, card_text=render_card(card), queue=queue, holds=holds, timeline=timeline,
                    burn=burn_rows(pacer.ctx), facts=facts, finished=finished, notices=notices,
                    selected=selected, progress=progress)


def window_chart(w: WindowFigures, now: datetime) -> dict[str, Any]:
    """One window's series for uPlot: x in Unix seconds (the window's start, now, its reset), and
    one list per series aligned to x, None where a series has no point."""
    length = LENGTHS.get(w.name[:2], timedelta(minutes=max(w.minutes_left, 1.0)))  # "7d_opus" is weekly too
    start = w.resets_at - length
    whole = max((w.resets_at - start).total_seconds(), 1.0)
    elapsed = min(max((now - start).total_seconds(), 0.0), whole)
    at = start + timedelta(seconds=elapsed)  # a rolled-over window's "now" stays inside its span, so x stays sorted
    projection = None if w.fleet_burn is None else w.spent + w.fleet_burn * w.minutes_left
    return {
        "name": w.name,
        "label": w.label,
        "calibrated": w.calibrated,
        "x": [start.timestamp(), at.timestamp(), w.resets_at.timestamp()],
        "pacing": [0.0, w.spot_budget * elapsed / whole, w.spot_budget],
        "sustainable": [None, w.spent, w.spot_budget],
        "projection": [None, w.spent, projection],
        "reserve": [w.spot_budget] * 3,
        "capacity": [w.capacity] * 3,
        "spent": [None, w.spent, None],
    }
