"""The one handler every surface calls: Slack's `/pacer`, its buttons and App Home, the console
and the REST API all hand `answer` an actor and a line of text.

It parses, authorizes, executes and renders from templates. Every refusal — a bad argument, a
denied role, a missing session, a state that says no — comes back as a Reply with ok=False:
one line plus the usage line, never a traceback, and nothing changed (the store handlers' one
transaction is rolled back; an engine call refuses before it writes).

Two dispatch tables: STORE handlers run inside the transaction that also read the ownership
authorization needed; ENGINE handlers run after it closes, because the turn engine opens its own
transactions. A command with no handler in either answers that it is not available yet.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlmodel import Session as DBSession

from bot.chat import changing, holding, reading, running, steering
from bot.chat.context import Answer, Context, EngineHandler, StoreContext, StoreHandler
from bot.chat.roles import Role, authorize, role_of, subjects
from bot.commands import command as c
from bot.commands import parse, usage_of, verb
from bot.commands.grammar import GENERAL_USAGE
from bot.runtime.process import Pacer
from scheduler.errors import (
    CommandError,
    Forbidden,
    InvalidInput,
    NotFound,
    Refused,
    StoreUnavailable,
)
from scheduler.front import OperatorHold, get_session
from templates import error_text, render_chat

log = logging.getLogger("pacer.chat")


@dataclass(frozen=True)
class Reply:
    text: str
    blocks: list[dict[str, Any]] | None = None
    in_channel: bool = False
    ok: bool = True


STORE: dict[str, StoreHandler] = {
    "help": reading.help_answer,
    "queue": reading.queue_answer,
    "holds": reading.holds_answer,
    "why": reading.why_answer,
    "promote": steering.promote,
    "demote": steering.demote,
    "rank": steering.rank,
    "trigger": reading.trigger_answer,
    "burn": reading.burn_answer,
}

ENGINE: dict[str, EngineHandler] = {
    "start": running.start,
    "policy": reading.policy_answer,
    "restart": running.restart,
    "weight": running.change_claim,
    "capacity": running.change_claim,
    "cap": running.set_cost_cap,
    "archive": changing.archive,
    "stop": changing.stop,
    "policy set": changing.policy_set,
    "trigger class": changing.trigger_class,
    "trigger precedence": changing.trigger_precedence,
    "pause": holding.pause,
    "new": running.new,
    "whatif": running.whatif,
    "summary": running.summary,
    "hold": holding.hold,
    "release": holding.release,
    "resume": holding.resume,
    "reply": holding.reply,
}


def available(name: str) -> bool:
    return name in STORE or name in ENGINE


def answer(pacer: Pacer, actor: str, text: str, *, surface: str, role: Role | None = None) -> Reply:
    """Parse, authorize, execute and render `text` as `actor` speaking on `surface`
    (`slack`, `slack_home`, `console` or `api`). `role` is one the surface has already
    established (the API's shared token acts with PACER_API_ROLE); without it the roster
    decides."""
    now = pacer.clock.now()
    flavour = "slack" if surface.startswith("slack") else "text"
    command: c.Command | None = None
    try:
        command = parse(text)
        result = _execute(pacer, command, actor, role or role_of(pacer.settings.roster, actor), surface, now)
        started = running.start_promoted(pacer, result.start_now, actor) if result.start_now else []
        # promote, demote and rank move the queue without the turn engine (which tells people itself)
        if result.reordered:
            pacer.ctx.emit("queue_reordered", session_id=getattr(command, "session_id", None), actor=actor)
        values = {**result.values, "started": started}
        body = render_chat(result.template, flavour, **values)
        return Reply(text=body, blocks=result.blocks, in_channel=result.in_channel)
    except CommandError as exc:
        return _refusal(flavour, str(exc), exc.usage)
    except (Forbidden, InvalidInput, NotFound, Refused) as exc:
        return _refusal(flavour, str(exc), usage_of(command.name) if command else GENERAL_USAGE)
    except running.Unavailable as exc:
        return Reply(text=render_chat("command_unavailable", flavour, command=exc.name), ok=False)
    except (StoreUnavailable, OperationalError, InterfaceError) as exc:
        # The transaction rolled back with the error: nothing changed, and the person is told
        # to try again rather than shown a driver's message.
        log.warning("chat: the store could not be read for %r: %s", text[:80], exc)
        return Reply(text=render_chat("command_store_unavailable", flavour), ok=False)
    except Exception:
        log.exception("chat: answering %r for %s on %s failed", text[:80], actor, surface)
        return Reply(text=render_chat("command_failed", flavour), ok=False)


def _execute(pacer: Pacer, command: c.Command, actor: str, role: Role | None, surface: str, now: datetime) -> Answer:
    name = verb(command)
    with pacer.db() as db:
        owners, armer = _ownership(db, command)
        authorize(command, actor, role, owners, hold_armer=armer, open_reads=surface == "console")
        store_handler = STORE.get(name)
        if store_handler is not None:
            return store_handler(StoreContext(pacer, actor, role, surface, now, db), command)
    engine_handler = ENGINE.get(name)
    if engine_handler is None:
        raise running.Unavailable(name)
    return engine_handler(Context(pacer, actor, role, surface, now), command)


def _ownership(db: DBSession, command: c.Command) -> tuple[Mapping[int, str | None], str | None]:
    """Who requested each session the command touches, and who placed the hold it releases."""
    owners = {sid: get_session(db, sid).requester for sid in subjects(command)}
    armer = None
    if isinstance(command, c.Release):
        hold = db.get(OperatorHold, command.hold_id)
        if hold is None:
            raise NotFound(error_text("operator_holds/not_found", hold_id=command.hold_id))
        armer = hold.armer
    return owners, armer


def _refusal(flavour: str, message: str, usage: str) -> Reply:
    return Reply(text=render_chat("command_error", flavour, message=message, usage=usage), ok=False)

