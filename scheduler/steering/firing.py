"""Firing a trigger: one outside event becomes one session.

The session is tagged with the genesis the caller names (`schedule` for a cron fire, `ao_event`
for a session-state change, `api` for a fire by hand), carries the trigger's id so its class and
precedence stamp and a later reclassification can find it, and gets its prompt from the
trigger's template rendered in the sandbox. Its first turn goes through the one entry point,
`submit_turn`, after the row is committed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jinja2 import TemplateError, TemplateSyntaxError

from scheduler import bounds
from scheduler.context import Context
from scheduler.engine.attempt import Submission
from scheduler.engine.turns import submit_turn
from scheduler.errors import InvalidInput, Refused
from scheduler.store.db import session_scope
from scheduler.store.models import Trigger
from scheduler.store.sessions import NewSession, create_session, get_trigger
from templates import error_text, render_prompt

log = logging.getLogger("pacer.triggers")

TITLE_CHARS = 80


@dataclass(frozen=True)
class Fired:
    """A session a trigger (or an intake) created, and what its first turn's submission said."""

    session_id: int
    submission: Submission


def trigger_facts(trigger: Trigger) -> dict[str, Any]:
    """What a template may read about the trigger that fired it."""
    return {"id": trigger.id, "name": trigger.name, "kind": trigger.kind}


def render_trigger_prompt(trigger: Trigger, facts: Mapping[str, Any]) -> str:
    """The trigger's template over `facts`, in the sandbox. A template that cannot render (an
    unknown variable, a forbidden attribute) is the trigger author's error, named by line."""
    context = {**facts, "trigger": trigger_facts(trigger)}
    try:
        return render_prompt(trigger.prompt_template, **context)
    except TemplateSyntaxError as exc:
        raise InvalidInput(
            error_text("firing/prompt_syntax", name=trigger.name, line=exc.lineno, message=exc.message),
            field="prompt_template",
        ) from None
    except TemplateError as exc:
        raise InvalidInput(
            error_text("firing/prompt_cannot_render", name=trigger.name, error=exc, available=sorted(context)),
            field="prompt_template",
        ) from None


@dataclass(frozen=True)
class TriggerEvent:
    """What fired a trigger: its genesis, the facts its template reads, and what the session
    records about where it came from."""

    genesis: str
    facts: Mapping[str, Any]
    title: str | None = None
    requester: str | None = None
    source: Mapping[str, Any] | None = None


def fire(ctx: Context, trigger_id: int, event: TriggerEvent, *, by_hand: bool = False) -> Fired:
    """Create the trigger's session from the event's facts and submit its first turn.

    A disabled trigger fires only by hand (`by_hand`): its events stop, its Invoke does not.
    """
    genesis, facts, title, requester, source = event.genesis, event.facts, event.title, event.requester, event.source
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        trigger = get_trigger(db, trigger_id)
        if not trigger.enabled and not by_hand:
            raise Refused(error_text("firing/trigger_disabled", name=trigger.name))
        prompt = render_trigger_prompt(trigger, facts)
        if not prompt:
            raise InvalidInput(error_text("firing/prompt_empty", name=trigger.name), field="prompt_template")
        problem = bounds.text_problem(prompt)
        if problem is not None:
            raise InvalidInput(
                error_text("firing/prompt_unstorable", name=trigger.name, problem=problem), field="prompt_template"
            )
        request = NewSession(
            title=(title or _title(prompt, trigger))[:200],
            genesis=genesis,
            trigger_id=trigger.id,
            requester=requester,
            source={**dict(source or {}), "trigger": trigger.name},
        )
        session = create_session(db, request, now=now)
        session.prompt = prompt
        db.add(session)
        db.flush()
        session_id = session.id or 0
    submission = submit_turn(ctx, session_id, prompt, kind="first")
    log.info("trigger %r fired (%s): session #%s %s", trigger_id, genesis, session_id, submission.outcome,
             extra={"genesis": genesis, "session_id": session_id})
    return Fired(session_id, submission)


def _title(prompt: str, trigger: Trigger) -> str:
    first = prompt.strip().splitlines()[0] if prompt.strip() else trigger.name
    return f"{trigger.name}: {first}"[:TITLE_CHARS]


def schedule_facts(trigger: Trigger, fired_at: datetime) -> dict[str, Any]:
    """What a schedule trigger's template may read."""
    config = dict(trigger.config or {})
    return {
        "fired_at": fired_at.isoformat(),
        "schedule": {"cron": config.get("cron", ""), "timezone": config.get("timezone", "UTC")},
        "text": "",
    }


def schedule_fire(ctx: Context, trigger_id: int) -> int | None:
    """The alarm target of a cron trigger: one `schedule` session per fire. A trigger deleted,
    disabled or changed to another kind since the job was armed fires nothing (the next sync
    removes the job)."""
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        trigger = db.get(Trigger, trigger_id)
        if trigger is None or not trigger.enabled or trigger.kind != "schedule":
            log.info("schedule for trigger #%s fired, but it is gone, disabled or no longer a schedule", trigger_id)
            return None
        facts = schedule_facts(trigger, now)
    try:
        fired = fire(
            ctx, trigger_id, TriggerEvent("schedule", facts, source={"kind": "schedule", "fired_at": now.isoformat()})
        )
    except (InvalidInput, Refused) as exc:
        log.warning("schedule for trigger #%s did not fire: %s", trigger_id, exc)
        return None
    return fired.session_id
