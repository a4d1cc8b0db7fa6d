"""Session events (`ao_event` triggers): a trigger that fires when a watched session, or any
session matching a filter, changes to one of the states it names.

The engine's notices (`ctx.emit`: started, held, paused, done, failed, refused, archived) are the
state changes. The listener in `ctx.plugins.listeners` only asks whether any enabled ao_event trigger
cares about that state, and if so arms a `session_event` alarm: matching and firing run off the
path that emitted the notice (a turn's completion, a request), in their own transactions.

Loops are cut by lineage: every session an ao_event trigger spawns records the chain of ao_event
triggers behind it (`source["ao_chain"]`), and a trigger never fires on a session whose chain
contains it — so it never fires on a session it spawned itself, directly or through others.

An ao_event trigger with `config.summary` asks, instead of a session of its own, for a status
summary of the session that changed: Pacer's own bookkeeping (`scheduler.steering.summary`),
admission asked before the fork, refused and never queued. No trigger fires on a bookkeeping
session's own changes: it is not the operator's work, and a summary of a summary would loop.

An ao_event trigger may instead subscribe to an event about the whole fleet (`config.events`):
`no_sessions_in_progress`, which the top-up sweep fires while fewer sessions than the top-up
ceiling are running (`scheduler.rules.top_up`), so the idle fleet is handed more work.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler import alarms
from scheduler.context import Context
from scheduler.errors import InvalidInput, Refused
from scheduler.rules.top_up import EVENT as NO_SESSIONS_IN_PROGRESS
from scheduler.steering.firing import Fired, TriggerEvent, fire
from scheduler.steering.summary import summarize
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Status, Trigger, Turn
from scheduler.store.policy import load_policy
from scheduler.store.session_view import session_view
from scheduler.store.sessions import class_of
from scheduler.store.trigger_reads import trigger_watched_states
from scheduler.store.turn_reads import spent_by

log = logging.getLogger("pacer.session_events")

STATES: tuple[str, ...] = ("done", "failed", "blocked", "archived", "waiting", "running")
# The notice each state change is announced by. `failed` covers blocked too: the row says which.
NOTICE_STATE: Mapping[str, str] = {
    "started": "running",
    "held": "waiting",
    "paused": "waiting",
    "done": "done",
    "failed": "failed",
    "refused": "archived",
    "archived": "archived",
}
FILTER_KEYS: tuple[str, ...] = ("genesis", "trigger", "scheduling_class")
# Events about the whole fleet rather than one session; a trigger subscribes with `events`.
FLEET_EVENTS: tuple[str, ...] = (NO_SESSIONS_IN_PROGRESS,)
OUTPUT_CHARS = 4000
_seq = itertools.count()


def states_of(trigger: Trigger) -> frozenset[str]:
    return frozenset(str(s) for s in (trigger.config or {}).get("states", []))


def events_of(trigger: Trigger) -> frozenset[str]:
    return frozenset(str(e) for e in (trigger.config or {}).get("events", []))


def chain_of(session: Session) -> list[int]:
    chain = (session.source or {}).get("ao_chain") or []
    return [int(t) for t in chain if isinstance(t, int) or str(t).isdigit()]


def is_loop(trigger: Trigger, session: Session) -> bool:
    """A trigger never fires on a session it spawned, directly or through other ao_event triggers."""
    return session.trigger_id == trigger.id or (trigger.id or 0) in chain_of(session)


def matches(
    trigger: Trigger, session: Session, new_status: str, *, scheduling_class: str, trigger_name: str | None
) -> bool:
    """Does `trigger` care that `session` changed to `new_status`? Pure over the rows."""
    if not trigger.enabled or trigger.kind != "ao_event" or new_status not in states_of(trigger):
        return False
    if session.bookkeeping:
        return False
    if is_loop(trigger, session):
        return False
    config = trigger.config or {}
    if "session_id" in config:
        return session.id == int(config["session_id"])
    flt: Mapping[str, Any] = config.get("filter") or {}
    if not flt:
        return False  # a trigger with neither a watched session nor a filter watches nothing
    if "genesis" in flt and session.genesis != flt["genesis"]:
        return False
    if "scheduling_class" in flt and scheduling_class != flt["scheduling_class"]:
        return False
    if "trigger" in flt:
        wanted = flt["trigger"]
        if isinstance(wanted, int):
            return session.trigger_id == wanted
        return trigger_name is not None and trigger_name == str(wanted)
    return True


def _watchers(db: DBSession) -> list[Trigger]:
    stmt = select(Trigger).where(Trigger.kind == "ao_event", col(Trigger.enabled).is_(True)).order_by(col(Trigger.id))
    return list(db.exec(stmt))


def listener(ctx: Context) -> Callable[[str, Mapping[str, Any]], None]:
    """The notice listener (`ctx.plugins.listeners`): arm a `session_event` alarm when some trigger could care.
    Which states any trigger watches is asked on every notice and changes rarely: it is kept
    until a trigger is written (`store.trigger_reads`)."""

    def watched() -> frozenset[str]:
        with session_scope(ctx.engine) as db:
            return trigger_watched_states(db, lambda: watched_states(_watchers(db)))

    def on_notice(event: str, context: Mapping[str, Any]) -> None:
        state = NOTICE_STATE.get(event)
        session_id = context.get("session_id")
        if state is None or session_id is None:
            return
        wanted = watched()
        # `failed` may have left the session blocked; the alarm reads which from the row.
        if state not in wanted and not (state == "failed" and "blocked" in wanted):
            return
        job_id = f"session_event:{session_id}:{state}:{time.time_ns()}:{next(_seq)}"
        ctx.schedule(job_id, ctx.clock.now(), alarms.SESSION_EVENT, int(session_id), state)

    return on_notice


def session_facts(db: DBSession, session: Session, new_status: str) -> dict[str, Any]:
    """What an ao_event template may read about the session that changed."""
    policy = load_policy(db)
    last = db.exec(
        select(Turn).where(Turn.session_id == session.id).order_by(col(Turn.id).desc()).limit(1)
    ).first()
    trigger = db.get(Trigger, session.trigger_id) if session.trigger_id is not None else None
    output = (last.output if last is not None else "")[:OUTPUT_CHARS]
    facts = {
        **session_view(session, policy, spent_by(db, session.id or 0)),
        "status": new_status,
        "trigger": trigger.name if trigger is not None else None,
        "prompt": session.prompt,
        "output": output,
        "error": (last.error or "") if last is not None else "",
    }
    return {"session": facts, "new_status": new_status, "text": output or session.title}


def session_event(ctx: Context, session_id: int, new_status: str) -> list[Fired]:
    """Fire every enabled ao_event trigger that matches `session_id` changing to `new_status`."""
    with session_scope(ctx.engine) as db:
        session = db.get(Session, session_id)
        if session is None:
            return []
        if new_status == "failed" and session.status == Status.BLOCKED.value:
            new_status = "blocked"
        policy = load_policy(db)
        cls = class_of(session, policy).value
        own_trigger = db.get(Trigger, session.trigger_id) if session.trigger_id is not None else None
        name = own_trigger.name if own_trigger is not None else None
        matched = [t for t in _watchers(db) if matches(t, session, new_status, scheduling_class=cls, trigger_name=name)]
        due = [t.id for t in matched if t.id is not None and not (t.config or {}).get("summary")]
        summaries = [t.name for t in matched if (t.config or {}).get("summary")]
        if not due and not summaries:
            return []
        facts = session_facts(db, session, new_status)
        chain = chain_of(session)
    for name in summaries:
        _ask_summary(ctx, name, session_id, new_status)
    fired: list[Fired] = []
    for trigger_id in due:
        try:
            fired.append(
                fire(
                    ctx,
                    trigger_id,
                    TriggerEvent(
                        "ao_event",
                        facts,
                        source={
                            "kind": "ao_event",
                            "watched_session_id": session_id,
                            "watched_status": new_status,
                            "ao_chain": [*chain, trigger_id],
                        },
                    ),
                )
            )
        except (InvalidInput, Refused) as exc:  # one bad trigger does not stop the others
            log.warning(
                "ao_event trigger #%s did not fire on session #%s %s: %s", trigger_id, session_id, new_status, exc
            )
    return fired


def _ask_summary(ctx: Context, trigger_name: str, session_id: int, new_status: str) -> None:
    """A summary trigger's fire: the status summary of the session that changed, or, refused
    before the fork, the digest written without a slot (in the log: nobody asked in a thread)."""
    try:
        summary = summarize(ctx, session_id, actor=f"trigger:{trigger_name}", surface="ao_event")
    except (InvalidInput, Refused) as exc:
        log.warning("summary trigger %r did not ask about session #%s %s: %s", trigger_name, session_id, new_status,
                    exc)
        return
    if summary.outcome == "forked":
        log.info("summary trigger %r: session #%s %s, summary #%s started", trigger_name, session_id, new_status,
                 summary.session_id)
    else:
        log.info("summary trigger %r: session #%s %s, refused before the fork (%s); digest: %s", trigger_name,
                 session_id, new_status, summary.sentence, summary.digest)


def watched_states(triggers: Sequence[Trigger]) -> frozenset[str]:
    return frozenset().union(*(states_of(t) for t in triggers)) if triggers else frozenset()


def fleet_event(ctx: Context, event: str, facts: Mapping[str, Any]) -> list[Fired]:
    """Fire every enabled ao_event trigger subscribed to the fleet event `event` (the top-up
    sweep's `no_sessions_in_progress`). Each session it spawns starts a chain of its own."""
    with session_scope(ctx.engine) as db:
        due = [t.id for t in _watchers(db) if t.id is not None and event in events_of(t)]
    fired: list[Fired] = []
    for trigger_id in due:
        try:
            fired.append(fire(ctx, trigger_id, TriggerEvent("ao_event", facts, source={
                "kind": "ao_event", "fleet_event": event, "ao_chain": [trigger_id],
            })))
        except (InvalidInput, Refused) as exc:  # one bad trigger does not stop the others
            log.warning("ao_event trigger #%s did not fire on %s: %s", trigger_id, event, exc)
    return fired
