"""The chat commands that place and lift holds, park sessions and speak in a thread: `hold`,
`release`, `resume`, `pause <id> queue` and `reply`. Thin calls into `scheduler`
(operator_holds, queue_holds, parking, promotion), listed in `bot.chat.answers`'s engine table.
"""

from __future__ import annotations

from bot.chat.context import Answer, Context
from bot.chat.running import pause as pause_until
from bot.commands import command as c
from scheduler.front import pause_into_spot_queue, place_hold, record_human_message, release_hold, resume_queue


def hold(ctx: Context, command: c.Hold) -> Answer:
    placed = place_hold(ctx.pacer.ctx, command.selector.kind, command.selector.values, armer=ctx.actor,
                        reason=command.reason, ttl=command.ttl)
    return Answer(
        "hold_placed",
        {
            "hold_id": placed.id,
            "selector": f"{placed.selector_kind} {placed.selector_value}".strip(),
            "reason": placed.reason,
            "expires_at": placed.expires_at,
            "armer": placed.armer,
        },
    )


def release(ctx: Context, command: c.Release) -> Answer:
    released = release_hold(ctx.pacer.ctx, command.hold_id, actor=ctx.actor, actor_role=ctx.role)
    return Answer("hold_released", {"hold_id": command.hold_id, "armer": released.armer if released else None})


def resume(ctx: Context, command: c.Resume) -> Answer:
    result = resume_queue(ctx.pacer.ctx, command.group, actor=ctx.actor)
    return Answer("resumed", {"sentence": result.sentence})


def pause(ctx: Context, command: c.Pause) -> Answer:
    if command.until is not None:
        return pause_until(ctx, command)
    parked = pause_into_spot_queue(ctx.pacer.ctx, command.session_id, resume_prompt=command.resume_prompt,
                                   halt=command.halt)
    return Answer("parked_answer", {"session_id": command.session_id, "sentence": parked.sentence})


def reply(ctx: Context, command: c.ThreadReply) -> Answer:
    surface = "slack_thread" if ctx.surface.startswith("slack") else ("api" if ctx.surface == "api" else "console")
    # A human message needs a person on the roster, not only a role: the API's shared token has a
    # role but is automation, so it posts follow-ups through /sessions/{id}/messages.
    message = record_human_message(ctx.pacer.ctx, command.session_id, ctx.actor, command.text, surface,
                                   roster=ctx.pacer.settings.roster)
    return Answer("replied", {"session_id": command.session_id, "message_id": message.id, "delivery": message.delivery})

