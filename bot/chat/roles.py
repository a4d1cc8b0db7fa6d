"""Who may do what. Pure: the roster maps a user to a role, and `authorize` judges a parsed
command against the actor, the role and who owns the sessions (or hold) it touches.

    operator  anything: policy, triggers, queue holds, anyone's holds, any session's rank
    member    read; create sessions and ask for summaries; reply in threads; promote, demote, rank, start, pause
              and archive sessions they requested; hold their own sessions; release their
              own holds
    (none)    help only, and on the console (a local terminal) the read-only commands too

A denial says which role is needed and what the actor is, in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from bot.commands import command as c
from bot.commands.command import Command, verb
from scheduler.errors import Forbidden
from templates import error_text


class Role(StrEnum):
    OPERATOR = "operator"
    MEMBER = "member"


READ_ONLY: tuple[type, ...] = (c.Help, c.Queue, c.Holds, c.Why, c.WhatIf, c.PolicyShow, c.TriggerShow, c.Burn)
OPERATOR_ONLY: tuple[type, ...] = (c.PolicySet, c.TriggerClass, c.TriggerPrecedence, c.Resume)
OWN_SESSION = (c.Promote, c.Demote, c.Rank, c.Start, c.Restart, c.Weight, c.Capacity, c.Cap, c.Pause, c.Archive, c.Stop)
ANY_MEMBER: tuple[type, ...] = (c.New, c.Summary, c.ThreadReply)


def role_of(roster: Mapping[str, str], actor: str) -> Role | None:
    """The actor's role, or None for someone not on the roster."""
    try:
        return Role(roster[actor])
    except (KeyError, ValueError):
        return None


def is_read_only(command: Command) -> bool:
    return isinstance(command, READ_ONLY)


def subjects(command: Command) -> tuple[int, ...]:
    """The session ids whose requester decides whether a member may run `command`."""
    if isinstance(command, OWN_SESSION):
        return (command.session_id,)
    if isinstance(command, c.Hold):
        return command.selector.session_ids
    return ()


def _label(command: Command) -> str:
    ids = subjects(command)
    name = verb(command)
    if isinstance(command, c.Hold) and command.selector.kind != "session":
        return f"hold {command.selector}"
    return f"{name} " + ", ".join(f"#{i}" for i in ids) if ids else name


def authorize(
    command: Command,
    actor: str,
    role: Role | None,
    owner_of_session: Mapping[int, str | None] | None = None,
    *,
    hold_armer: str | None = None,
    open_reads: bool = False,
) -> None:
    """Raise Forbidden unless `actor` in `role` may run `command`.

    `owner_of_session` maps each id in `subjects(command)` to its requester; `hold_armer` is
    who placed the hold a `release` names. `open_reads` lets anyone read (the console).
    """
    owners = owner_of_session or {}
    name = _label(command)
    if isinstance(command, c.Help) or (is_read_only(command) and (role is not None or open_reads)):
        return
    if role is None:
        operator = _needs_operator(command, actor, owners, hold_armer)
        raise Forbidden(error_text("roles/not_rostered", name=name, operator=operator, actor=actor))
    if role is Role.OPERATOR:
        return
    if isinstance(command, (*READ_ONLY, *ANY_MEMBER)):
        return
    if isinstance(command, OPERATOR_ONLY):
        raise Forbidden(error_text("roles/operator_only", name=name))
    if isinstance(command, c.Release):
        if hold_armer == actor:
            return
        raise Forbidden(error_text("roles/release_not_yours", hold_id=command.hold_id, armer=hold_armer))
    if isinstance(command, c.Hold) and command.selector.kind != "session":
        raise Forbidden(error_text("roles/hold_beyond_own", name=name))
    others = [i for i in subjects(command) if owners.get(i) != actor]
    if others:
        first = others[0]
        raise Forbidden(error_text("roles/not_your_session", name=name, session_id=first, requester=owners.get(first)))


def _needs_operator(command: Command, actor: str, owners: Mapping[int, str | None], armer: str | None) -> bool:
    """What a member would still be refused: the role to name to someone off the roster."""
    if isinstance(command, OPERATOR_ONLY):
        return True
    if isinstance(command, c.Hold) and command.selector.kind != "session":
        return True
    if isinstance(command, c.Release):
        return armer != actor
    return any(owners.get(i) != actor for i in subjects(command))
