"""Per-session cost caps: a person may cap what a session's turns cost together, in US dollars
(`Session.cost_cap_usd`; NULL: no cap). A session's spend is the sum of its turns' recorded
`cost_usd`.

What is measurable: a runner reports a turn's cost only when the turn ends, so while a turn runs
its cost is estimated as the runtime's burn rate (`fleet.burn_rate`, dollars a minute) times the
minutes it has run. Two rules follow:

  before a turn       the spend has reached the cap: the turn is not started. The admission
                      check holds it, saying what was spent, the cap, and how to raise it.
  while a turn runs   spend + the running turn's estimate has reached the cap: the turn is
                      halted (`records.halt_turn`), and the session holds on the cap, its
                      next turn a resume of the halted one.

No turn's cost is known before it runs, so the first rule cannot refuse the turn that *would*
cross the cap; the second stops that turn when the estimate reaches the cap. A capped turn's
start (`before_start`) arms an alarm (`cost_cap_due`) for the instant the estimate reaches it;
the alarm halts the turn, or arms again when the cap was raised or the rate moved meanwhile.
The ceiling sweep checks every capped running turn too, the net under a lost alarm. A person's
start-now is held like any other start: the cap is the person's own limit, raised or cleared
by `set_cap`, which asks for a queue pass so a held session starts at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler import alarms
from scheduler.bounds import check_cost_cap
from scheduler.context import Context, request_queue_pass
from scheduler.engine.attempt import PASS_THROUGH, Block, TurnAttempt, Work
from scheduler.engine.fleet import burn_rate
from scheduler.engine.records import halt_turn, hold, lock, running_turn
from scheduler.errors import Refused
from scheduler.ports import TurnResult
from scheduler.rules.failures import NextStep
from scheduler.rules.gate import Decision
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Status, Turn
from scheduler.store.turn_reads import spent_by
from templates import error_text, render

log = logging.getLogger("pacer.cost_caps")

REASON = "cost_cap"


@dataclass(frozen=True)
class CapSpend:
    """A session's spend against its cap, as the hold and every surface show it."""

    session_id: int
    spent: float
    cap: float | None

    @property
    def is_reached(self) -> bool:
        return self.cap is not None and self.spent >= self.cap


def cap_spend(db: DBSession, session: Session) -> CapSpend:
    return CapSpend(session.id or 0, spent_by(db, session.id or 0), session.cost_cap_usd)


def running_estimate(ctx: Context, turn: Turn, now: datetime) -> float:
    """What a running turn has cost so far by the runtime's burn rate: the only measure there is
    before the runner reports the turn's own cost at its end."""
    if turn.started_at is None:
        return 0.0
    minutes = max((now - turn.started_at).total_seconds() / 60.0, 0.0)
    return burn_rate(ctx, turn.runtime) * minutes


def admission_check(ctx: Context) -> Callable[[DBSession, Session, datetime], Block | None]:
    def cap_check(db: DBSession, session: Session, now: datetime) -> Block | None:
        if session.cost_cap_usd is None:
            return None
        spend = cap_spend(db, session)
        if not spend.is_reached:
            return None
        return Block(REASON, render("text/cost_cap_block.j2", spend=spend), skip_only=True)

    return cap_check


def halt_capped(work: Work, *, skip: Collection[int] = ()) -> list[int]:
    """Halt every running turn whose session's spend plus the turn's burn estimate has reached
    its cap, and hold the session on the cap with a resume as its next turn. `skip`: sessions the
    caller halted already in this transaction. Returns the sessions halted."""
    db, ctx, now = work.db, work.ctx, work.now
    stmt = (
        select(Session, Turn)
        .join(Turn, col(Turn.session_id) == col(Session.id))
        .where(Turn.status == "running", col(Session.cost_cap_usd).is_not(None))
    )
    halted: list[int] = []
    for session, turn in list(db.exec(stmt)):
        if session.id in skip or turn.kind in PASS_THROUGH or session.cost_cap_usd is None:
            continue
        spend = CapSpend(
            session.id or 0, spent_by(db, session.id or 0) + running_estimate(ctx, turn, now), session.cost_cap_usd
        )
        if spend.is_reached:
            _halt(work, turn, spend)
            halted.append(spend.session_id)
    return halted


def _halt(work: Work, turn: Turn, spend: CapSpend) -> None:
    row = lock(work.db, spend.session_id)
    halt_turn(work, turn)
    # The halted turn reports HALTED and the session waits; this hold is what brings it back.
    _hold_at_cap(work, row, spend)


def _hold_at_cap(work: Work, row: Session, spend: CapSpend, template: str = "text/cost_cap_halted.j2") -> None:
    sentence = render(template, spend=spend)
    due = work.now if spend.cap is None else None  # a cap cleared meanwhile holds nothing: its re-check is now
    hold(work, row, TurnAttempt(render("text/continue_nudge.j2"), (), "resume"), Block(REASON, sentence, due))
    work.effects.cancel(_due_job_id(spend.session_id))
    work.effects.notice("paused", session_id=row.id, reason=REASON, sentence=sentence, title=row.title)
    log.warning("session #%s halted at its cost cap: %s", row.id, sentence)


def on_turn_finished(work: Work, session: Session, turn: Turn, result: TurnResult, step: NextStep) -> bool:
    """The `turn_finished` hook: an agent that stopped itself at the budget it was given (the
    backstop inside the agent, `TurnRequest.max_budget_usd`) leaves its session as Pacer's own
    halt at the cap does, held on the cap with a resume as its next turn. True: taken charge."""
    if not result.extra.get("budget_reached") or session.status == Status.ARCHIVED.value:
        return False
    spend = CapSpend(session.id or 0, spent_by(work.db, session.id or 0), session.cost_cap_usd)
    _hold_at_cap(work, session, spend, "text/cost_cap_agent_stopped.j2")
    return True


def _due_job_id(session_id: int) -> str:
    return f"cost-cap:{session_id}"


def _arm(work: Work, session_id: int, runtime: str, left: float) -> None:
    """Arm the alarm for when the burn estimate spends `left` more dollars; at no rate, none."""
    rate = burn_rate(work.ctx, runtime)
    if rate > 0:
        work.effects.alarm(
            _due_job_id(session_id), work.now + timedelta(minutes=left / rate), alarms.COST_CAP_DUE, session_id
        )


def before_start(work: Work, session: Session, decision: Decision) -> None:
    """The `before_start` hook: a capped session's turn arms the alarm that halts it at the cap."""
    if session.cost_cap_usd is None or session.id is None:
        return
    try:
        _arm(work, session.id, session.runtime, max(session.cost_cap_usd - spent_by(work.db, session.id), 0.0))
    except Exception:  # a start never fails on its alarm: the ceiling sweep is the net under it
        log.exception("session #%s: the cost-cap alarm could not be armed", session.id)


def cost_cap_due(ctx: Context, session_id: int) -> None:
    """The alarm: halt the session's running turn if its estimate has reached the cap, else arm
    again for when it will (a raised cap, a changed rate, a turn that started later)."""
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        work = Work(db, ctx, now)
        session = db.get(Session, session_id)
        turn = running_turn(db, session_id)
        if session is None or session.cost_cap_usd is None or turn is None or turn.kind in PASS_THROUGH:
            return
        spend = CapSpend(session_id, spent_by(db, session_id) + running_estimate(ctx, turn, now), session.cost_cap_usd)
        if spend.is_reached:
            _halt(work, turn, spend)
        else:
            _arm(work, session_id, turn.runtime, session.cost_cap_usd - spend.spent)
    work.effects.apply(ctx)


def set_cap(ctx: Context, session_id: int, cap: float | None, *, actor: str | None) -> dict[str, list[float | None]]:
    """Set (or with None clear) a session's cost cap; every surface calls this. Checked before
    anything moves. Returns what moved, {"cost_cap_usd": [before, after]} or {}. A cap raised or
    cleared may let a held session run: the queue looks again."""
    check_cost_cap(cap)
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        session = lock(db, session_id)
        if session.status == Status.ARCHIVED.value:  # a done session may still be replied to
            raise Refused(error_text("sessions/cost_cap_finished", session_id=session_id, status=session.status))
        before = session.cost_cap_usd
        if before == cap:
            return {}
        session.cost_cap_usd = cap
        session.updated_at = now
        db.add(session)
        running = session.status == Status.RUNNING.value
    if running and cap is not None:  # a running turn's alarm is timed for the old cap: ask now
        ctx.schedule(_due_job_id(session_id), now, alarms.COST_CAP_DUE, session_id)
    log.info("session #%s cost cap changed by %s: %s -> %s", session_id, actor or "someone", before, cap)
    ctx.emit("claim_changed", session_id=session_id, actor=actor)  # its row on every queue view
    request_queue_pass(ctx)
    return {"cost_cap_usd": [before, cap]}
