"""Where every arrival stands when the simulated span ends. Nothing may be lost: each session is
done (all its planned turns and replies finished) or still owned by something that will move it
— a running turn, a hold with its re-check, a pause the ceiling sweep resumes, a message queued
behind a turn, a follow-up the simulator will deliver. Anything else is `lost:<why>`, and the
report counts it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import Engine
from sqlmodel import col, select

from bot.simulate.demand import Tracked
from bot.simulate.workers import SimWorkerPool
from scheduler.front import EnqueuedMessage, Session, Status, Turn, VirtualDeferrer, hold_job_id, session_scope
from templates import error_text

LOST = "lost:"  # the state's prefix; the report counts the states by what comes before the colon


def account(
    engine: Engine, deferrer: VirtualDeferrer, pool: SimWorkerPool, tracked: Mapping[int, Tracked], now: datetime
) -> dict[int, str]:
    open_items: dict[int, int] = {}
    for item in pool.work.items.values():
        if item.done_at is None:
            open_items[item.session_id] = open_items.get(item.session_id, 0) + 1
    running = {span.session_id for tid, span in pool.spans.items() if tid in pool.running}
    states: dict[int, str] = {}
    with session_scope(engine) as db:
        rows = {s.id: s for s in db.exec(select(Session))}
        queued = {
            sid
            for sid in db.exec(select(EnqueuedMessage.session_id).where(col(EnqueuedMessage.delivered_at).is_(None)))
        }
        running_rows = {sid for sid in db.exec(select(Turn.session_id).where(Turn.status == "running"))}
    for sid, track in tracked.items():
        row = rows.get(sid)
        if row is None:
            states[sid] = LOST + error_text("simulate/lost_no_row")
            continue
        if track.refused:
            states[sid] = LOST + error_text("simulate/lost_refused", refusals=track.refused)
            continue
        complete = (
            track.submitted == track.planned and track.replies_sent == track.replies_due and not open_items.get(sid)
        )
        if complete and row.status == Status.DONE.value:
            states[sid] = "done"
        elif sid in running or sid in running_rows:
            states[sid] = (
                "running"
                if (sid in running) == (sid in running_rows)
                else LOST + error_text("simulate/lost_running_without_worker")
            )
        elif row.status == Status.WAITING.value and row.pause_reason is not None:
            states[sid] = "paused"
        elif row.status == Status.WAITING.value and row.hold_reason is not None:
            armed = deferrer.next_run(hold_job_id(sid)) is not None
            states[sid] = (
                "held" if armed or row.hold_retry_at is not None else LOST + error_text("simulate/lost_held_unarmed")
            )
        elif sid in queued:
            states[sid] = "queued"
        elif deferrer.next_run(f"sim-follow-up:{sid}") is not None:
            states[sid] = "pending"  # its next turn is the simulated requester's to send
        elif row.status == Status.WAITING.value and row.wake_at is not None and row.wake_at > now:
            states[sid] = "asleep"
        else:
            states[sid] = LOST + error_text(
                "simulate/lost_stranded", status=row.status, open_turns=open_items.get(sid, 0)
            )
    return states
