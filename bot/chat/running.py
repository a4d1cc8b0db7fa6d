"""The commands that drive the turn engine: start, pause until, new and whatif, plus the
start-now that follows a promotion. Each is a thin call into `scheduler` (start_now,
wake_me_up_later, create_session + submit_turn, the gate) through the process's scheduler
Context, `pacer.ctx`.

These run outside `bot.chat.answers`'s transaction: the engine opens its own, and on SQLite a second
writer would wait on the first.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sqlmodel import Session as DBSession

from bot.chat.context import Answer, Context
from bot.chat.gate_view import spot_runtime
from bot.commands import command as c
from bot.commands.times import resolve
from bot.runtime.process import Pacer
from scheduler.errors import PacerError
from scheduler.front import (
    TOP_OF_SPOT,
    Genesis,
    NewSession,
    class_of,
    create_session,
    explain,
    get_session,
    load_policy,
    new_spot_asking,
    read_quota,
    restart_from_scratch,
    session_scope,
    set_cap,
    spot_probe,
    start_now,
    submit_turn,
    summarize,
    verdict_now,
    wake_me_up_later,
)
from scheduler.front import change_claim as change_session_claim

log = logging.getLogger("pacer.chat")

TITLE_CHARS = 80


class Unavailable(PacerError):
    """The command (or this form of it) has no engine behind it in this process."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} is not available yet")
        self.name = name


def start(ctx: Context, command: c.Start) -> Answer:
    sctx = ctx.pacer.ctx
    result = start_now(sctx, command.session_id, actor=ctx.actor)
    return Answer("started", {"session_id": command.session_id, "shape": result.shape, "sentence": result.sentence})


def restart(ctx: Context, command: c.Restart) -> Answer:
    result = restart_from_scratch(ctx.pacer.ctx, command.session_id, actor=ctx.actor)
    return Answer("started", {"session_id": command.session_id, "shape": "restart", "sentence": result.sentence})


def change_claim(ctx: Context, command: c.Weight | c.Capacity) -> Answer:
    changed = change_session_claim(ctx.pacer.ctx, command.session_id, command.claim, actor=ctx.actor)
    return Answer("claim_changed", {"session_id": command.session_id, "changed": changed})


def set_cost_cap(ctx: Context, command: c.Cap) -> Answer:
    changed = set_cap(ctx.pacer.ctx, command.session_id, command.cost_cap_usd, actor=ctx.actor)
    return Answer("cap_changed", {"session_id": command.session_id, "changed": changed, "cap": command.cost_cap_usd})


def pause(ctx: Context, command: c.Pause) -> Answer:
    if command.until is None:  # a park: bot.chat.holding.pause takes it before this
        raise Unavailable("pause … queue")
    sctx = ctx.pacer.ctx
    at = resolve(command.until, ctx.now, field="until")
    wake_me_up_later(sctx, command.session_id, at, command.resume_prompt)
    return Answer("paused", {"session_id": command.session_id, "until": at, "prompt": command.resume_prompt})


def new(ctx: Context, command: c.New) -> Answer:
    sctx = ctx.pacer.ctx
    settings = ctx.pacer.settings
    title = command.prompt.strip().splitlines()[0][:TITLE_CHARS]
    request = NewSession(
        title=title,
        genesis=Genesis.COMMAND.value,
        # A spot submission lands at the top of the spot queue: a human typed it seconds ago.
        # A rank given with it is the person's own answer to where it goes.
        scheduling_class="spot" if command.spot else None,
        place=TOP_OF_SPOT if command.rank == "top" or (command.spot and command.rank is None) else None,
        precedence=command.rank if isinstance(command.rank, int) else None,
        runtime="echo" if settings.runner == "echo" else settings.runtime_name,
        requester=ctx.actor,
        source={"surface": ctx.surface},
        repository=command.repository,
        declares=command.prompt,
        weight=1.0 if command.claim.weight is None else command.claim.weight,
        capacity=command.claim.capacity,
        capacity_multiplier=command.claim.multiplier,
        cost_cap_usd=command.cost_cap_usd,
    )
    with session_scope(sctx.engine) as db:
        session = create_session(db, request, now=ctx.now)
        session.prompt = command.prompt
        db.add(session)
        db.flush()
        session_id = session.id or 0
        scheduling_class = class_of(session, load_policy(db)).value
        precedence = session.precedence
    submission = submit_turn(sctx, session_id, command.prompt, kind="first")
    return Answer(
        "created",
        {
            "session_id": session_id,
            "title": title,
            "scheduling_class": scheduling_class,
            "precedence": precedence,
            "outcome": submission.outcome,
            "sentence": submission.sentence,
            "retry_at": submission.retry_at,
        },
    )


def whatif(ctx: Context, command: c.WhatIf) -> Answer:
    """Would it start now, and if not why: the one verdict the engine asks, changing nothing."""
    sctx = ctx.pacer.ctx
    reading = read_quota(sctx, ctx.now)
    with DBSession(sctx.engine) as db:  # read-only: never committed
        if command.session_id is None:
            runtime = spot_runtime(ctx.pacer.settings)
            session = spot_probe(db, runtime, ctx.now, requester=ctx.actor, surface=ctx.surface)
            subject: dict[str, Any] = {"id": None, "scheduling_class": "spot"}
            said = verdict_now(db, sctx, session, new_spot_asking(sctx, runtime), reading, ctx.now)
        else:
            session = get_session(db, command.session_id)
            subject = {
                "id": session.id,
                "scheduling_class": class_of(session, load_policy(db)).value,
                "status": session.status,
            }
            said = verdict_now(db, sctx, session, None, reading, ctx.now)
        db.rollback()
    decision = said.decision
    assert decision is not None  # a surface's verdict always carries the gate's figures
    text = explain(decision, ctx.now)
    return Answer(
        "whatif",
        {
            "subject": subject,
            "allowed": said.allowed,
            "reason": str(decision.reason),
            "why": text.why,
            "until": text.until,
            "block": said.block,
            "asleep_until": said.asleep_until,
        },
    )


def summary(ctx: Context, command: c.Summary) -> Answer:
    """A status summary of a session: a bookkeeping fork asked of admission before it is made;
    refused, the blurb from the session's own record (`scheduler.steering.summary`)."""
    result = summarize(ctx.pacer.ctx, command.session_id, actor=ctx.actor, surface=ctx.surface)
    return Answer("summary", {"summary": result})


def start_promoted(pacer: Pacer, ids: Sequence[int], actor: str) -> list[str]:
    """Seed 001: every promotion to priority performs StartNow on the rows it promoted.
    Returns one sentence per session; a refusal (asleep, unreadable queue) is its sentence."""
    sctx = pacer.ctx
    if not ids:
        return []
    sentences = []
    for session_id in ids:
        try:
            sentences.append(start_now(sctx, session_id, actor=actor).sentence)
        except PacerError as exc:
            sentences.append(str(exc))
    return sentences
