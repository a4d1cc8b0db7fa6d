"""Ending and recovering sessions: archive (and stop), and the start-up recovery after a crash.

Archiving a held session ends it deliberately: its alarm is left alone, fires once, sees the
archive and schedules nothing more; the hold record stays as the history of why it waited.

Stopping is archiving, said as what it does to a running turn: `stop` halts the turn wherever it
runs (`records.halt_turn`: this process's worker, or a worker machine's job) and archives the
session in the same transaction, so its late HALTED report finds it archived and starts nothing.
Archived is the end state a stop needs already: terminal (no door submits a turn to it, no
comment or reply reaches it, a re-check that fires finds it and schedules nothing), shown as
ended on every surface, and its worktree is removed. A separate "stopped" status would be the
same state under a second name that every read of "ended" would have to learn. What a stop
adds is the record of why: `source["stopped"]` = {by, why, label, halted}, which the status
comment reads from the row and the `archived` notice carries to the Slack thread.

    why     closed (its issue or pull request was closed), unlabeled (its trigger's `label` was
            removed), stop (`/pacer stop`, `POST /api/v1/sessions/{id}/stop`), archive
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import col, select

from scheduler.context import Context
from scheduler.engine import leases
from scheduler.engine.attempt import Block, TurnAttempt, Work
from scheduler.engine.effects import Effects
from scheduler.engine.pause import release_after_crash
from scheduler.engine.records import halt_turn, hold, lock, running_turn
from scheduler.engine.turns import submit_turn
from scheduler.errors import Refused
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Status, Turn
from templates import error_text, render

log = logging.getLogger("pacer.lifecycle")

def _interrupted(now: datetime) -> Block:
    """A turn the process lost is asked again at once."""
    return Block("interrupted", render("text/interrupted.j2"), retry_at=now)


ARCHIVABLE = {
    Status.WAITING.value,
    Status.RUNNING.value,
    Status.NEEDS_INPUT.value,
    Status.DONE.value,
    Status.FAILED.value,
    Status.BLOCKED.value,
}


STOP_REASONS = frozenset({"closed", "unlabeled", "stop", "archive"})
STOPPED_KEY = "stopped"  # Session.source["stopped"]: who ended it, why, and whether a turn was halted


@dataclass(frozen=True)
class Stopped:
    previous: str  # the status it had
    halted: bool  # a running turn was halted


def archive(ctx: Context, session_id: int, *, actor: str | None = None) -> str:
    """End a session (a running turn is halted); the status it had."""
    return stop(ctx, session_id, actor=actor, why="archive").previous


def stop(ctx: Context, session_id: int, *, actor: str | None = None, why: str = "stop",
         label: str | None = None) -> Stopped:
    """Halt the session's running turn, if any, and archive it, recording why (module doc)."""
    if why not in STOP_REASONS:
        raise ValueError(f"why={why!r}: one of {sorted(STOP_REASONS)}")
    now = ctx.clock.now()
    effects = Effects(queue_pass=True)
    with session_scope(ctx.engine) as db:
        session = lock(db, session_id)
        if session.status == Status.ARCHIVED.value:
            raise Refused(error_text("lifecycle/already_archived", session_id=session_id))
        if session.status not in ARCHIVABLE:
            raise Refused(error_text("lifecycle/cannot_archive", session_id=session_id, status=session.status))
        turn = running_turn(db, session_id)
        if turn is not None:
            halt_turn(Work(db, ctx, now, effects), turn)
        previous = session.status
        session.status = Status.ARCHIVED.value
        session.updated_at = now
        record = {"by": actor, "why": why, "label": label, "halted": turn is not None}
        session.source = {**(session.source or {}), STOPPED_KEY: record}  # reassigned: JSON is not tracked in place
        db.add(session)
        effects.notice("archived", session_id=session_id, actor=actor, title=session.title, stopped=record)
    effects.apply(ctx)
    # WARN on purpose, as a policy change does: a deliberate end records who ended it.
    log.warning("session #%s archived by %s (%s%s); it was %s", session_id, actor or "an unnamed caller", why,
                ", its running turn halted" if turn is not None else "", previous)
    return Stopped(previous, turn is not None)


def recover(ctx: Context) -> dict[str, int]:
    """After a crash: a turn whose lease ran out has no process behind it (`leases`). Its prompt
    goes back through the gate as a hold due now (a preemption mark on it is released first: the
    mark would make the hold a pause with no re-check); a session that never got its first turn
    gets it. A turn another process still renews is its owner's, and is left alone."""
    now = ctx.clock.now()
    effects = Effects()
    counts = {"interrupted": 0, "first_turns": 0}
    never_started: list[tuple[int, str, list[dict[str, object]]]] = []
    with session_scope(ctx.engine) as db:
        for turn in leases.lost_turns(db, now, alive_here=_alive_here(ctx)):
            counts["interrupted"] += _give_back(Work(db, ctx, now, effects), turn)
        orphans = db.exec(
            select(Session).where(
                Session.status == Status.WAITING.value,
                col(Session.hold_reason).is_(None),
                col(Session.pause_reason).is_(None),
                col(Session.park_reason).is_(None),
                col(Session.wake_at).is_(None),
                col(Session.started_at).is_(None),
            )
        ).all()
        for session in orphans:
            has_turn = db.exec(select(Turn.id).where(Turn.session_id == session.id)).first() is not None
            if not has_turn and session.prompt:
                never_started.append((session.id or 0, session.prompt, session.attachments))
    effects.apply(ctx)
    for session_id, prompt, attachments in never_started:
        submit_turn(ctx, session_id, prompt, attachments, kind="first")
        counts["first_turns"] += 1
    if any(counts.values()):
        log.warning("recovered after a restart: %s", counts)
    return counts


def recover_lost_turns(ctx: Context) -> int:
    """The lease sweep: the running turns whose owner stopped renewing them, given back as
    `recover` gives them back; how many were held again. With worker machines, the jobs of
    workers that stopped beating are ended first, and a turn such a worker took and never
    claimed is given back with them."""
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        if ctx.ports.dispatcher is not None:
            leases.expire_stalled(db, ctx.ports.dispatcher.stalled(db), now)
        lost = leases.lost_turns(db, now, alive_here=_alive_here(ctx))
        given = sum(_give_back(Work(db, ctx, now, effects), turn) for turn in lost)
    effects.apply(ctx)
    if given:
        log.warning("%s turn(s) whose owner stopped renewing their lease were held again, due now", given)
    return given


def _alive_here(ctx: Context) -> list[int]:
    """The turns this process's workers have accepted and not yet reported, when the pool can
    say (`ThreadWorkerPool.running`, and the pools wrapping it); a virtual pool cannot."""
    running = getattr(ctx.ports.workers, "running", None)
    return list(running()) if callable(running) else []


def hand_over(ctx: Context, turn_ids: Collection[int]) -> int:
    """A stopping process's turns that did not finish in time, given back as `recover` gives
    back a crashed one: each prompt goes through the gate again as a hold due now, for whichever
    process leads next. A report that arrives afterwards for one of them is ignored."""
    if not turn_ids:
        return 0
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        turns = db.exec(select(Turn).where(col(Turn.id).in_(list(turn_ids)), Turn.status == "running")).all()
        given = sum(_give_back(Work(db, ctx, now, effects), turn) for turn in turns)
    effects.apply(ctx)
    return given


def _give_back(work: Work, turn: Turn) -> int:
    """End a turn no process runs any more and hold its prompt, due now; 1 if it was held."""
    db, now = work.db, work.now
    turn.status = "failed"
    turn.outcome = "interrupted"
    turn.error = "interrupted: the process stopped while this turn ran"
    turn.finished_at = now
    db.add(turn)
    if turn.job_id is not None and work.ctx.ports.dispatcher is not None:
        work.ctx.ports.dispatcher.end(db, turn.job_id)  # an attempt is a turn row: its job never runs again
    session = lock(db, turn.session_id)
    if session.status == Status.ARCHIVED.value:
        return 0
    session.status = Status.WAITING.value
    if release_after_crash(db, session):
        log.warning("session #%s: its preemption mark is released; the crash freed its slot", session.id)
    hold(work, session, TurnAttempt(turn.prompt, turn.attachments, turn.kind), _interrupted(now))
    return 1
