"""The read-only commands: help, queue, holds, burn, why, trigger <id> and policy. They change nothing, so any
rostered user may run them (and anyone at the console).

`policy` is an engine handler, run after the authorizing transaction closes: the gate card reads
the quota first, and a quota source may open a transaction of its own."""

from __future__ import annotations

from dataclasses import dataclass

from bot.chat import gate_view, ladder_view, queue_view
from bot.chat.context import Answer, Context, StoreContext
from bot.commands import command as c
from bot.commands.grammar import NAMES, USAGE
from bot.slack import blocks
from bot.triggers.writes import plain, session_count
from scheduler.front import (
    PROJECTION_MINUTES,
    Genesis,
    Mechanism,
    Session,
    all_holds,
    audit_log,
    burn_rows,
    forecast_of,
    genesis_default,
    get_session,
    get_trigger,
    is_spot,
    load_policy,
    session_view,
    spends,
    spent_by,
    waiting_reason,
)

TEXT_ROWS = 50  # the console and API list this many rows before "and N more"
HELD_ROWS = 30


def help_answer(ctx: StoreContext, command: c.Help) -> Answer:
    topics = [command.topic] if command.topic else list(NAMES)
    return Answer(
        "help",
        {
            "topics": [(name, USAGE[name]) for name in topics],
            "single": command.topic is not None,
            "actor": ctx.actor,
            "role": ctx.role.value if ctx.role else None,
            "surface": ctx.surface,
        },
    )


def queue_answer(ctx: StoreContext, command: c.Queue) -> Answer:
    policy = load_policy(ctx.db)
    # Slack: fetch a full message's worth; `blocks.capped` trims to the limit and counts the rest.
    limit = ctx.block_limit if ctx.flavour == "slack" else TEXT_ROWS
    view = queue_view.build(
        ctx.db,
        policy,
        scheduling_class=command.scheduling_class,
        genesis=command.genesis,
        every_status=command.every_status,
        limit=limit,
        now=ctx.now,
    )
    built = blocks.queue_blocks(view, limit=ctx.block_limit) if ctx.flavour == "slack" else None
    return Answer("queue", {"view": view}, blocks=built)


@dataclass(frozen=True)
class HeldSession:
    id: int
    title: str
    records: list[Mechanism]  # the headline first, then the others on the record


def holds_answer(ctx: StoreContext, command: c.Holds) -> Answer:
    """Every hold in force, from the one read model the API and the App Home read too."""
    values = all_holds(ctx.db, ctx.now, session_rows=HELD_ROWS).values()
    built = blocks.holds_blocks(values, now=ctx.now, limit=ctx.block_limit) if ctx.flavour == "slack" else None
    return Answer("holds", values, blocks=built)


def _records(session: Session, ctx: StoreContext) -> list[Mechanism]:
    reason = waiting_reason(session, ctx.now)
    return ([reason.headline] if reason.headline else []) + [loser.mechanism for loser in reason.others]


def why_answer(ctx: StoreContext, command: c.Why) -> Answer:
    session = get_session(ctx.db, command.session_id)
    policy = load_policy(ctx.db)
    reason = waiting_reason(session, ctx.now, spot=is_spot(session, policy))
    place = forecast = None
    if session.status == "waiting" and not session.bookkeeping:  # its bounded queue ladder (seed 000)
        place = ladder_view.selected(ctx.db, ladder_view.read(ctx.db, policy, ctx.now), command.session_id)
        forecast = forecast_of(ctx.db, command.session_id)  # kept by the leader's refresh, never computed here
    return Answer(
        "why",
        {
            "session": session_view(session, policy, spent_by(ctx.db, session.id or 0)),
            "headline": reason.headline,
            "others": list(reason.others),
            "now": ctx.now,
            "place": place,
            "forecast": forecast,
        },
    )


def burn_answer(ctx: StoreContext, command: c.Burn) -> Answer:
    """The $/min of each runtime + model, as `GET /api/v1/burn` gives it."""
    return Answer("burn", {"rates": burn_rows(ctx.pacer.ctx), "minutes": PROJECTION_MINUTES})


def trigger_answer(ctx: StoreContext, command: c.TriggerShow) -> Answer:
    """A trigger's class as `GET /api/v1/triggers/{id}` gives it: the class it stamps on every
    session it starts, or `default`, when they take their genesis's class (named, as it is now)."""
    trigger = get_trigger(ctx.db, command.trigger_id)
    derived = genesis_default(Genesis(trigger.kind), load_policy(ctx.db).overrides)
    view = plain(trigger, sessions=session_count(ctx.db, command.trigger_id))
    return Answer("trigger", {"trigger": view, "derived": derived.value})


def policy_answer(ctx: Context, command: c.PolicyShow) -> Answer:
    """The decision a spot session would get now and every number behind it (the gate card),
    then the settings and the last change to them."""
    card = gate_view.current_card(ctx.pacer, ctx.now)
    with ctx.pacer.db() as db:
        last = audit_log(db, limit=1)
        line = last[0].line if last else None
        budgeted = spends(db, load_policy(db), [])
    return Answer(
        "policy",
        {
            "card": card,
            "d": card.decision,
            "policy": card.policy,
            "overrides": sorted((str(g), str(cls)) for g, cls in card.policy.overrides.items()),
            "last_change": line,
            "spends": budgeted,
        },
    )
