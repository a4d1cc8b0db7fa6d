"""The re-check sweep (seed 001, "A hold that loses its re-check"): a hold more than ten minutes past
its own re-check time with no alarm armed is a broken ladder. The sweep advances the stamp first
— a conditional update, so the advanced stamp is its own idempotency key on SQLite and
PostgreSQL alike — then, once that has committed, arms the alarm again, at most ten a pass
spread over three minutes.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy import bindparam, update
from sqlalchemy import select as sa_select
from sqlmodel import col

from scheduler import alarms
from scheduler.context import Context
from scheduler.engine.records import hold_job_id
from scheduler.store.db import core, session_scope
from scheduler.store.models import Session, Status

log = logging.getLogger("pacer.sweeps")

SWEEP_INTERVAL = timedelta(minutes=5)
OVERDUE = timedelta(minutes=10)
REARM_PER_PASS = 10
REARM_SPREAD = timedelta(minutes=3)
PAGE = 200
SCAN_LIMIT = 2_000


_OVERDUE = (  # built once: the sweep runs every five minutes and almost always finds nothing
    sa_select(col(Session.id), col(Session.hold_retry_at))
    .where(
        col(Session.hold_reason).is_not(None),
        col(Session.hold_retry_at) < bindparam("late"),
        col(Session.status) == Status.WAITING.value,
        # Asleep, paused or parked: its alarm stood down on purpose, and the wake or the resume
        # asks again; calling it lost would re-arm it every pass until then.
        col(Session.pause_reason).is_(None),
        col(Session.park_reason).is_(None),
        col(Session.wake_at).is_(None) | (col(Session.wake_at) <= bindparam("now")),
    )
    .order_by(col(Session.hold_retry_at), col(Session.id))
    .limit(PAGE)
)
_OVERDUE_AFTER = _OVERDUE.where(
    (col(Session.hold_retry_at) > bindparam("stamp"))
    | ((col(Session.hold_retry_at) == bindparam("stamp")) & (col(Session.id) > bindparam("sid")))
)


def recheck_sweep(ctx: Context) -> list[int]:
    now = ctx.clock.now()
    lost = _lost_holds(ctx, now)
    step = REARM_SPREAD / REARM_PER_PASS
    rearmed: list[int] = []
    if lost:
        with session_scope(ctx.engine) as db:
            for session_id, stamp in lost:
                due = now + step * len(rearmed)
                moved = db.execute(
                    update(Session)
                    .where(col(Session.id) == session_id, col(Session.hold_retry_at) == stamp)
                    .values(hold_retry_at=due)
                ).rowcount  # type: ignore[attr-defined]  # an UPDATE gives a CursorResult; SQLAlchemy types it Result
                if moved == 1:
                    rearmed.append(session_id)
                    log.warning("session #%s: its re-check was lost; re-armed for %s", session_id, due.isoformat())
    for i, session_id in enumerate(rearmed):
        ctx.schedule(hold_job_id(session_id), now + step * i, alarms.RECHECK, session_id)
    return rearmed


def _lost_holds(ctx: Context, now: datetime) -> list[tuple[int, datetime]]:
    """Overdue holds with no alarm armed, oldest first, at most ten.

    Late-but-armed holds are skipped, so this pages through the overdue ones until ten lost
    ones are found or the scan bound is reached: a crowd of merely late alarms must not hide a
    lost one behind it. Each page is read in its own short transaction and the alarms are asked
    outside it, because on SQLite the job store waits on any transaction this thread holds."""
    lost: list[tuple[int, datetime]] = []
    scanned = 0
    after: tuple[datetime | None, int] = (None, 0)
    while len(lost) < REARM_PER_PASS and scanned < SCAN_LIMIT:
        with session_scope(ctx.engine) as db:
            if after[0] is None:
                page = core(db, _OVERDUE, {"late": now - OVERDUE, "now": now}).all()
            else:
                page = core(
                    db, _OVERDUE_AFTER, {"late": now - OVERDUE, "now": now, "stamp": after[0], "sid": after[1]}
                ).all()
        if not page:
            break
        scanned += len(page)
        after = (page[-1][1], int(page[-1][0] or 0))
        for row_id, stamp in page:
            session_id = int(row_id or 0)
            if ctx.alarm_at(hold_job_id(session_id)) is None and not ctx.is_running_alarm(alarms.RECHECK, session_id):
                lost.append((session_id, stamp))
                if len(lost) >= REARM_PER_PASS:
                    break
    return lost
