"""Releasing what a trigger's promotion moved (seed 001, "Stored only when someone chose it":
TriggerPromotionReleaseJob).

Changing a trigger's class to priority rewrites its still-waiting sessions in the same write;
starting them is this alarm's job, armed only after that write has committed, so the new class is
visible before anything is pulled forward, and a long backlog never runs inside the request.

Each session is re-read here rather than trusted from the write, and four populations are left
alone: a session no longer waiting, one whose class did not end up priority, one no longer
carrying this trigger, and one carrying a pause or a park (each has its own resume owner; a
deliberate park is a per-session choice a trigger-wide one must not override). Each remaining one
goes through StartNow, the owner every promotion path uses. One that cannot be started does not
abandon the rest.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from scheduler import alarms
from scheduler.context import Context
from scheduler.engine.start_now import start_now
from scheduler.errors import PacerError
from scheduler.rules.genesis import SchedulingClass
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Status
from scheduler.store.policy import load_policy
from scheduler.store.sessions import class_of

log = logging.getLogger("pacer.trigger_release")

_seq = itertools.count()


@dataclass
class Release:
    started: list[int] = field(default_factory=list)  # StartNow ran (the gate may still hold it)
    left_alone: dict[int, str] = field(default_factory=dict)  # id -> why
    failed: dict[int, str] = field(default_factory=dict)  # id -> the error


def arm_release(ctx: Context, trigger_id: int, session_ids: Sequence[int]) -> str | None:
    """Arm the release alarm for `session_ids`. Call only after the trigger's write committed."""
    if not session_ids:
        return None
    job_id = f"trigger_release:{trigger_id}:{time.time_ns()}:{next(_seq)}"
    ctx.schedule(job_id, ctx.clock.now(), alarms.TRIGGER_RELEASE, trigger_id, *[int(s) for s in session_ids])
    return job_id


def _why_not(session: Session | None, trigger_id: int, cls: SchedulingClass | None) -> str | None:
    if session is None:
        return "it no longer exists"
    if session.status != Status.WAITING.value:
        return f"it is {session.status}, no longer waiting"
    if cls is not SchedulingClass.PRIORITY:
        return "its class did not end up priority"
    if session.trigger_id != trigger_id:
        return "it no longer carries this trigger"
    if session.pause_reason is not None:
        return f"it carries a pause ({session.pause_reason}) with its own resume owner"
    if session.park_reason is not None:
        return f"it carries a park ({session.park_reason}) with its own resume owner"
    return None


def release_promoted(ctx: Context, trigger_id: int, *session_ids: int) -> Release:
    """The alarm target: StartNow each promoted session that is still releasable."""
    result = Release()
    for session_id in session_ids:
        try:
            with session_scope(ctx.engine) as db:
                session = db.get(Session, session_id)
                cls = class_of(session, load_policy(db)) if session is not None else None
                why = _why_not(session, trigger_id, cls)
            if why is not None:
                result.left_alone[session_id] = why
                continue
            start_now(ctx, session_id, actor=f"trigger:{trigger_id}")
            result.started.append(session_id)
        except PacerError as exc:  # asleep, unreadable queue: this one stays, the rest go on
            result.failed[session_id] = str(exc)
        except Exception as exc:
            log.exception("releasing session #%s after trigger #%s was promoted failed", session_id, trigger_id)
            result.failed[session_id] = f"{type(exc).__name__}: {exc}"
    log.info(
        "trigger #%s promotion release: started %s, left alone %s, failed %s",
        trigger_id, result.started, sorted(result.left_alone), sorted(result.failed),
    )
    return result
