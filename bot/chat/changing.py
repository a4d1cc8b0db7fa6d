"""The chat commands that archive or stop a session, set the policy and change a trigger. Each calls the
one function the REST API calls for the same action, in that function's own transaction, so a
`/pacer` command, a button, the console and the API change the same rows, emit the same events,
request the same queue pass and write the same audit:

    archive             scheduler.engine.lifecycle.archive: the row, the `archived` event, a queue pass
    stop                scheduler.engine.lifecycle.stop: the same, saying it was stopped and whether a
                        running turn was halted
    policy set          scheduler.store.policy.set_policy: the row, the audit line, a queue pass
    policy reset-spend  scheduler.holds.budgets.reset_spend: the row, the audit line, a queue pass
    trigger class       bot.triggers.writes.change_trigger: the reclassification, then the release alarm
    trigger precedence  bot.triggers.writes.change_trigger

Listed in `bot.chat.answers`'s engine table: they run after the authorizing transaction has closed.
"""

from __future__ import annotations

from typing import Any

from bot.chat.context import Answer, Context
from bot.commands import command as c
from bot.triggers.writes import change_trigger
from scheduler.front import archive as archive_session
from scheduler.front import get_session, load_policy, reset_spend, session_scope, session_view, set_policy, spent_by
from scheduler.front import stop as stop_session


def archive(ctx: Context, command: c.Archive) -> Answer:
    sctx = ctx.pacer.ctx
    archive_session(sctx, command.session_id, actor=ctx.actor)
    with session_scope(sctx.engine) as db:
        view = session_view(get_session(db, command.session_id), load_policy(db), spent_by(db, command.session_id))
    return Answer("archived", {"session": view})


def stop(ctx: Context, command: c.Stop) -> Answer:
    sctx = ctx.pacer.ctx
    stopped = stop_session(sctx, command.session_id, actor=ctx.actor, why="stop")
    with session_scope(sctx.engine) as db:
        view = session_view(get_session(db, command.session_id), load_policy(db), spent_by(db, command.session_id))
    return Answer("stopped", {"session": view, "halted": stopped.halted})


def policy_set(ctx: Context, command: c.PolicySet) -> Answer:
    if command.reset_spend:
        audit = None
        for runtime in command.reset_spend:
            audit = reset_spend(ctx.pacer.ctx, runtime, surface=ctx.audit_surface, actor=ctx.actor)
    else:
        changes: dict[str, Any] = dict(command.changes)
        if command.temporary_max is not None:
            number, lasting = command.temporary_max
            changes["max_sessions_override"] = number
            changes["max_sessions_override_until"] = ctx.now + lasting if lasting is not None else None
        audit = set_policy(ctx.pacer.ctx, changes, merge=command.merged(), surface=ctx.audit_surface, actor=ctx.actor)
    moved = [(key, shown(old), shown(new)) for key, (old, new) in (audit.changes if audit else {}).items()]
    return Answer("policy_set", {"moved": moved, "line": audit.line if audit else None}, in_channel=bool(moved))


def shown(value: Any) -> str:
    """A policy value as a sentence shows it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or "none"
    return str(value)


def trigger_class(ctx: Context, command: c.TriggerClass) -> Answer:
    change = change_trigger(
        ctx.pacer.ctx,
        ctx.pacer.scheduler,
        command.trigger_id,
        {"scheduling_class": command.scheduling_class},
        actor=ctx.actor,
    )
    write = change.write
    return Answer(
        "trigger_class",
        {
            "trigger": {"id": command.trigger_id, "name": change.after["name"]},
            "before": change.before["scheduling_class"],
            "after": change.after["scheduling_class"],
            "rewritten": write.reclassified.rewritten if write.reclassified is not None else 0,
            "moved": write.moved,
            "promoted": list(write.promoted),
        },
        in_channel=write.moved > 0,
    )


def trigger_precedence(ctx: Context, command: c.TriggerPrecedence) -> Answer:
    change = change_trigger(ctx.pacer.ctx, ctx.pacer.scheduler, command.trigger_id, {"precedence": command.precedence},
                            actor=ctx.actor)
    return Answer(
        "trigger_precedence",
        {
            "trigger": {"id": command.trigger_id, "name": change.after["name"]},
            "before": change.before["precedence"],
            "after": change.after["precedence"],
        },
    )
