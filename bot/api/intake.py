"""Intake: an outside arrival becomes a genesis-tagged session whose first turn is submitted.

Shared by the surfaces that create work. Each function is named for where the work came from;
each creates the session (class and precedence resolved by `scheduler.store.sessions.create_session`),
records its prompt on the row so a lost first start can be rebuilt, commits, then submits the
first turn through `scheduler.engine.turns.submit_turn`.

    api_session     POST /api/v1/sessions (genesis `api` unless declared or inherited)
    schedule_fired  a cron trigger's fire (genesis `schedule`)
    session_event   a watched session changed state (genesis `ao_event`)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlmodel import Session as DBSession

from scheduler.front import (
    Context,
    Fired,
    Genesis,
    NewSession,
    create_session,
    schedule_fire,
    session_scope,
    submit_turn,
)
from scheduler.front import session_event as fire_on_session_event

__all__ = ["Fired", "api_session", "schedule_fired", "session_event"]


def api_session(
    ctx: Context, request: NewSession, prompt: str, attachments: Sequence[Mapping[str, Any]] = (),
    *, also: Callable[[DBSession, int], None] | None = None,
) -> Fired:
    """An API caller's session: `api` genesis when it declares none and names no parent or
    fork (a child inherits its parent's genesis verbatim). `also` writes what must commit with
    the session (its idempotency key), given the transaction and the new session's id."""
    now = ctx.clock.now()
    if not request.declares:
        request = replace(request, declares=prompt)  # its prompt may say what it depends on
    with session_scope(ctx.engine) as db:
        session = create_session(db, request, now=now, fallback=Genesis.API)
        session.prompt = prompt
        session.attachments = [dict(a) for a in attachments]
        db.add(session)
        db.flush()
        session_id = session.id or 0
        if also is not None:
            also(db, session_id)
    submission = submit_turn(ctx, session_id, prompt, attachments, kind="first")
    return Fired(session_id, submission)


def schedule_fired(ctx: Context, trigger_id: int) -> int | None:
    """A cron trigger fired: one `schedule` session from its template. None when the trigger is
    gone, disabled or its template cannot render (logged)."""
    return schedule_fire(ctx, trigger_id)


def session_event(ctx: Context, session_id: int, new_status: str) -> list[Fired]:
    """`session_id` changed to `new_status`: fire every ao_event trigger watching it."""
    return fire_on_session_event(ctx, session_id, new_status)

