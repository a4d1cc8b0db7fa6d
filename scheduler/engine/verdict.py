"""One admission verdict: whether a turn may start now, asked the same way by every path that
starts or holds one (admission, the queue pass, a pause's resume) and by every surface that says
whether one would (`whatif`, the gate card), so what Pacer says and what it does cannot drift
apart (seed 001, "MCP parity": the page and the tool render the same decision).

    v = verdict(work, session, lambda: gate_decision(work, policy, session))
    v.allowed        # no check beyond the gate holds it, and the gate admits it
    v.block          # the first check beyond the gate that holds it (it wins: it names the reason)
    v.hold_block(now)  # what a hold records: that check's block, or the gate's reason and sentence

The checks beyond the gate (operator holds, queue holds, prerequisites, concurrency groups,
capacity, …) are asked first, in the order `scheduler.wiring` registers them, each failing open
with a log line if it cannot be read; the gate is asked only when none holds the turn, unless a
surface asks for both (`gate_too`), since it shows the gate's figures either way. A session asleep
on a wake still ahead is held by it first, where the path asks (`wake`): the wake is that session's
next event (seed 001, "A pause outranks precedence").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session as DBSession

from scheduler.context import Context
from scheduler.engine.attempt import Block, Work
from scheduler.engine.fleet import asking_for, build_snapshot, burn_rate
from scheduler.engine.records import is_asleep
from scheduler.ports import QuotaReading
from scheduler.rules.explain import explain
from scheduler.rules.gate import Decision, decide
from scheduler.rules.genesis import Genesis
from scheduler.rules.precedence import TOP_OF_SPOT
from scheduler.rules.snapshot import Asking
from scheduler.rules.waiting import banner
from scheduler.store.models import Session
from scheduler.store.policy import load_policy
from scheduler.store.sessions import NewSession, new_row

log = logging.getLogger("pacer.admit")

ASLEEP = "asleep"  # the reason a wake still ahead holds a session by


@dataclass(frozen=True)
class Verdict:
    """What admission says of one turn now."""

    decision: Decision | None  # the gate's; None when a wake or a check beyond it held the turn first
    block: Block | None = None  # the first check beyond the gate that holds it
    asleep: Block | None = None  # its wake, still ahead
    asleep_until: datetime | None = None

    @property
    def allowed(self) -> bool:
        return self.asleep is None and self.block is None and self.decision is not None and self.decision.allowed

    def hold_block(self, now: datetime) -> Block:
        """What holds this turn: its wake, else the check's block, else the gate's reason and sentence."""
        if self.asleep is not None:
            return self.asleep
        if self.block is not None:
            return self.block
        assert self.decision is not None
        return Block(self.decision.reason, explain(self.decision, now).sentence())


def blocked(work: Work, session: Session) -> Block | None:
    """The first admission check beyond the gate that says no, or None."""
    for check in work.ctx.plugins.admission_checks:
        try:
            block: Block | None = check(work.db, session, work.now)
        except Exception:  # a check that cannot be read fails open, with a log line
            log.exception("admission check %s failed; failing open", getattr(check, "__name__", check))
            continue
        if block is not None:
            return block
    return None


def verdict(
    work: Work, session: Session, gate: Callable[[], Decision], *, wake: bool = False, gate_too: bool = False
) -> Verdict:
    """The one verdict on `session`'s turn: its wake (when `wake`), the checks beyond the gate,
    then `gate` (the path's own way to ask it: a pass shares one snapshot among its candidates,
    a resume widens the reserve)."""
    asleep = Block(ASLEEP, banner(session, work.now)) if wake and is_asleep(session, work.now) else None
    until = session.wake_at if asleep is not None else None
    if asleep is not None and not gate_too:
        return Verdict(None, asleep=asleep, asleep_until=until)
    block = blocked(work, session)
    if block is not None and not gate_too:
        return Verdict(None, block)
    return Verdict(gate(), block, asleep, until)


def spot_probe(
    db: DBSession, runtime: str, now: datetime, *, requester: str | None = None, surface: str | None = None
) -> Session:
    """The session `new --spot` would create, never written: the checks beyond the gate (a hold
    on all or on class:spot, a queue hold) hold it as they would hold the real one."""
    ask = NewSession(
        genesis=Genesis.COMMAND.value,
        scheduling_class="spot",
        place=TOP_OF_SPOT,
        runtime=runtime,
        requester=requester,
        source={"surface": surface} if surface else {},
    )
    return Session(**new_row(db, ask, now=now))


def new_spot_asking(ctx: Context, runtime: str) -> Asking:
    """What a new spot session asks of the gate: a slot and its runtime's burn, nothing running."""
    return Asking(0, True, False, ctx.runtime(runtime).spends_quota, burn_rate(ctx, runtime))


def verdict_now(db: DBSession, ctx: Context, session: Session, asking: Asking | None, reading: QuotaReading | None,
                now: datetime) -> Verdict:
    """The verdict a surface shows on `session` (a real one, or one a command would create,
    never written), read-only: its wake, every check beyond the gate, and the gate on a fresh
    snapshot, all as a start would ask them. `asking` stands in for the session's own burn (a
    session not yet created has none)."""
    policy = load_policy(db)
    snapshot = build_snapshot(db, ctx, policy, reading)
    work = Work(db, ctx, now)
    return verdict(
        work,
        session,
        lambda: decide(snapshot, asking or asking_for(session, ctx, policy), now),
        wake=True,
        gate_too=True,
    )


__all__ = ["ASLEEP", "Verdict", "blocked", "new_spot_asking", "spot_probe", "verdict", "verdict_now"]
