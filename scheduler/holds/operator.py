"""Operator holds (seed 000, "Held agents"): a person — or a session — holds every session a
selector matches; they stay waiting, even with capacity free, and each shows "held by <armer>".

Selectors: `session` (ids), `genesis`, `trigger` (id or name, stored as the id), `repository`
(the one it works in, or its issue's `source["repository"]`, in lower case either way), `label`
(`source["labels"]`), `class` (the resolved class) and `all`.
The armer is a person (their chat id) or a session (`session:<id>`). A hold ends when it is
released (by its armer, or by an operator for anyone's), when its TTL passes, or when its
armer session ends. Expired and armer-ended holds are pruned by the sweep, and their alarm
asks for a queue pass; until then admission already ignores them.

Holds fail open: a hold store that cannot be read is ignored by admission, with a log line,
rather than stranding waiters. A held session and the session or person its hold waits on,
waiting on each other, raise one `hold_deadlock` notice (once per hold and pair, recorded on the hold's row in
`deadlocks_told`), which reaches the ops channel and both sessions' threads; the TTL
still moves the pair eventually.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler import alarms, bounds
from scheduler.context import Context
from scheduler.engine.attempt import Block
from scheduler.engine.effects import Effects
from scheduler.errors import Forbidden, InvalidInput, NotFound, Refused
from scheduler.holds.prerequisites import target_sessions, waits_on
from scheduler.rules.genesis import Genesis, SchedulingClass
from scheduler.rules.snapshot import PolicyView
from scheduler.store.db import session_scope
from scheduler.store.hold_reads import armer_session_id, ended_armers, live_operator_holds, operator_holds_in_force
from scheduler.store.models import ACTIVE_STATUSES, OperatorHold, Prerequisite, Session, Status, Trigger
from scheduler.store.policy import load_policy
from scheduler.store.prerequisite_rows import repository_of
from scheduler.store.sessions import class_of
from templates import error_text, render

log = logging.getLogger("pacer.operator_holds")

SELECTOR_KINDS = ("session", "genesis", "trigger", "repository", "label", "class", "all")
MAX_TTL = timedelta(days=30)
MAX_REASON = 500
REASON = "operator_hold"
OPERATOR_ROLE = "operator"


def expiry_job_id(hold_id: int) -> str:
    return f"operator_hold:{hold_id}"


# --------------------------------------------------------------------------- matching (pure)


def is_live(hold: OperatorHold, now: datetime, *, armer_ended: bool = False) -> bool:
    """In force: not released, its TTL not passed, its armer session not ended."""
    if hold.released_at is not None or armer_ended:
        return False
    return hold.expires_at is None or hold.expires_at > now


def labels_of(session: Session) -> set[str]:
    raw = (session.source or {}).get("labels") or []
    names = [item.get("name") if isinstance(item, dict) else item for item in raw] if isinstance(raw, list) else []
    return {str(n).lower() for n in names if n}


def selects(hold: OperatorHold, session: Session, policy: PolicyView | None) -> bool:
    kind, value = hold.selector_kind, hold.selector_value
    if kind == "all":
        return True
    if kind == "session":
        return str(session.id) in value.split(",")
    if kind == "genesis":
        return session.genesis == value
    if kind == "trigger":
        return session.trigger_id is not None and str(session.trigger_id) == value
    if kind == "repository":
        return value in (repository_of(session), session.repository)
    if kind == "label":
        return value in labels_of(session)
    if kind == "class":
        return policy is not None and class_of(session, policy).value == value
    return False


def applies(
    hold: OperatorHold, session: Session, now: datetime, policy: PolicyView | None, *, armer_ended: bool = False
) -> bool:
    return is_live(hold, now, armer_ended=armer_ended) and selects(hold, session, policy)


# --------------------------------------------------------------------------- placing and releasing


def _normalize(db: DBSession, kind: str, values: Sequence[str]) -> str:
    if kind not in SELECTOR_KINDS:
        raise InvalidInput(
            error_text("operator_holds/selector_unknown", kind=kind, kinds=SELECTOR_KINDS), field="selector"
        )
    items = [str(v).strip() for v in values if str(v).strip()]
    if kind == "all":
        if items:
            raise InvalidInput(error_text("operator_holds/all_takes_no_value"), field="selector")
        return ""
    if kind == "session":
        if not items:
            raise InvalidInput(error_text("operator_holds/session_needs_id"), field="selector")
        ids: list[int] = []
        for item in items:
            digits = item.lstrip("#")
            if not digits.isdigit() or int(digits) < 1:
                raise InvalidInput(error_text("operator_holds/not_a_session_id", item=item), field="selector")
            if db.get(Session, int(digits)) is None:
                raise NotFound(error_text("sessions/not_found", session_id=digits))
            if int(digits) not in ids:
                ids.append(int(digits))
        return ",".join(str(i) for i in ids)
    if len(items) != 1:
        raise InvalidInput(error_text("operator_holds/one_value", kind=kind), field="selector")
    value = items[0]
    if kind == "genesis":
        if value not in {g.value for g in Genesis}:
            raise InvalidInput(
                error_text("operator_holds/genesis_unknown", value=value, geneses=[g.value for g in Genesis]),
                field="selector",
            )
        return value
    if kind == "class":
        if value not in {c.value for c in SchedulingClass}:
            raise InvalidInput(error_text("operator_holds/class_unknown", value=value), field="selector")
        return value
    if kind == "trigger":
        found = (
            db.get(Trigger, int(value.lstrip("#")))
            if value.lstrip("#").isdigit()
            else db.exec(select(Trigger).where(Trigger.name == value)).first()
        )
        if found is None:
            raise NotFound(error_text("operator_holds/trigger_not_found", value=value))
        return str(found.id)
    if kind == "repository":
        return bounds.check_repository(value, "selector")
    if len(value) > 100:
        raise InvalidInput(error_text("operator_holds/label_too_long"), field="selector")
    return value.lower()


@dataclass(frozen=True)
class NewOperatorHold:
    """A hold someone asks for: what it selects, who arms it, why, and for how long (None: until released)."""

    kind: str
    values: Sequence[str] = ()
    armer: str = ""
    reason: str = ""
    ttl: timedelta | None = None


def place_hold(
    ctx: Context, kind: str, values: Sequence[str] = (), *, armer: str, reason: str = "", ttl: timedelta | None = None,
) -> OperatorHold:
    """Hold every session `kind`/`values` selects. `armer` is who placed it (a chat id, or
    `session:<id>`); `ttl` None holds until released. Nothing is written on a bad argument."""
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        hold = add_hold(db, NewOperatorHold(kind, tuple(values), armer, reason, ttl), now)
        announce(ctx, db, hold, now, effects)
    effects.apply(ctx)
    return hold


def add_hold(db: DBSession, new: NewOperatorHold, now: datetime) -> OperatorHold:
    """`place_hold`'s row, in the caller's transaction: a webhook writes it beside its delivery
    record, so a hold and its lifting take effect in the order their deliveries commit. Its
    alarm and notices follow the commit (`announce_holds`)."""
    if not new.armer or not new.armer.strip():
        raise InvalidInput(error_text("operator_holds/armer_missing"), field="armer")
    if len(new.reason) > MAX_REASON:
        raise InvalidInput(error_text("operator_holds/reason_too_long", limit=MAX_REASON), field="reason")
    if new.ttl is not None and not timedelta(0) < new.ttl <= MAX_TTL:
        raise InvalidInput(error_text("operator_holds/ttl_range"), field="ttl")
    hold = OperatorHold(
        selector_kind=new.kind, selector_value=_normalize(db, new.kind, new.values), armer=new.armer.strip(),
        reason=new.reason.strip(), created_at=now, expires_at=now + new.ttl if new.ttl is not None else None,
    )
    db.add(hold)
    db.flush()
    return hold


def announce(ctx: Context, db: DBSession, hold: OperatorHold, now: datetime, effects: Effects) -> None:
    """What a new hold sets going after its commit: its TTL alarm, the deadlocks it closes, its notice."""
    if hold.expires_at is not None:
        effects.alarm(expiry_job_id(hold.id or 0), hold.expires_at, alarms.OPERATOR_HOLD_EXPIRED, hold.id)
    notice_deadlocks(ctx, db, [hold], now, effects)
    effects.notice(
        "operator_hold",
        hold_id=hold.id,
        armer=hold.armer,
        selector_kind=hold.selector_kind,
        selector_value=hold.selector_value,
    )
    log.warning("operator hold %s placed by %s on %s %s", hold.id, hold.armer, hold.selector_kind, hold.selector_value)


def announce_holds(ctx: Context, hold_ids: Sequence[int]) -> None:
    """`announce` the holds `add_hold` wrote in a transaction that has committed, those still in force."""
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        for hold in db.exec(
            select(OperatorHold).where(col(OperatorHold.id).in_(list(hold_ids))).order_by(col(OperatorHold.id))
        ):
            if is_live(hold, now):
                announce(ctx, db, hold, now, effects)
    effects.apply(ctx)


def release_hold(ctx: Context, hold_id: int, *, actor: str, actor_role: str | None = None) -> OperatorHold:
    """Release a hold. Another person's hold needs the operator role."""
    now = ctx.clock.now()
    effects = Effects(queue_pass=True)  # the held sessions are admitted on the next pass if capacity allows
    with session_scope(ctx.engine) as db:
        hold = db.get(OperatorHold, hold_id, with_for_update=True)
        if hold is None:
            raise NotFound(error_text("operator_holds/not_found", hold_id=hold_id))
        if hold.armer != actor and (actor_role or "") != OPERATOR_ROLE:
            raise Forbidden(error_text("operator_holds/not_yours", hold_id=hold_id, armer=hold.armer))
        if hold.released_at is not None:
            raise Refused(
                error_text("operator_holds/already_released", hold_id=hold_id, by=hold.released_by, at=hold.released_at)
            )
        if not is_live(hold, now):
            raise Refused(error_text("operator_holds/already_expired", hold_id=hold_id, at=hold.expires_at))
        end_hold(db, hold, now, actor, effects)
    effects.apply(ctx)
    log.warning("operator hold %s released by %s", hold_id, actor)
    return hold


def end_hold(db: DBSession, hold: OperatorHold, at: datetime, by: str, effects: Effects) -> None:
    """End `hold` in the caller's transaction; `effects` (after the commit) drop its TTL alarm."""
    hold.released_at = at
    hold.released_by = by
    db.add(hold)
    db.flush()
    effects.cancel(expiry_job_id(hold.id or 0))


# --------------------------------------------------------------------------- reading


def live_holds(db: DBSession, now: datetime) -> list[OperatorHold]:
    """The holds in force now, read afresh (admission reads them once per transaction)."""
    return operator_holds_in_force(db, now)


# --------------------------------------------------------------------------- admission


def admission_check(ctx: Context) -> Callable[[DBSession, Session, datetime], Block | None]:
    def operator_hold_check(db: DBSession, session: Session, now: datetime) -> Block | None:
        holds = live_operator_holds(db, now)
        if not holds:
            return None
        policy = load_policy(db) if any(h.selector_kind == "class" for h in holds) else None
        for hold in holds:
            if applies(hold, session, now, policy):
                sentence = render("text/operator_hold_block.j2", hold=hold)
                return Block(REASON, sentence, retry_at=hold.expires_at, skip_only=True)
        return None

    return operator_hold_check


# --------------------------------------------------------------------------- expiry, prune, deadlocks


def expired(ctx: Context, hold_id: int) -> None:
    """The TTL alarm: the hold ends and the queue looks again."""
    now = ctx.clock.now()
    effects = Effects()
    with session_scope(ctx.engine) as db:
        hold = db.get(OperatorHold, hold_id, with_for_update=True)
        if hold is None or hold.released_at is not None or hold.expires_at is None:
            return
        if hold.expires_at > now:
            effects.alarm(expiry_job_id(hold_id), hold.expires_at, alarms.OPERATOR_HOLD_EXPIRED, hold_id)
        else:
            end_hold(db, hold, hold.expires_at, "its TTL passed", effects)
            effects.queue_pass = True
    effects.apply(ctx)


def prune(ctx: Context) -> list[int]:
    """End holds whose TTL passed or whose armer session ended; ask for a queue pass if any did."""
    now = ctx.clock.now()
    effects = Effects()
    pruned: list[int] = []
    with session_scope(ctx.engine) as db:
        open_rows = list(db.exec(select(OperatorHold).where(col(OperatorHold.released_at).is_(None))))
        ended = ended_armers(db, open_rows)
        for hold in open_rows:
            if hold.expires_at is not None and hold.expires_at <= now:
                end_hold(db, hold, hold.expires_at, "its TTL passed", effects)
            elif hold.armer in ended:
                end_hold(db, hold, now, "its armer ended", effects)
            else:
                continue
            pruned.append(hold.id or 0)
        effects.queue_pass = bool(pruned)
    effects.apply(ctx)
    if pruned:
        log.info("pruned operator holds %s", pruned)
    return pruned


@dataclass(frozen=True)
class Deadlock:
    hold_id: int
    armer: str
    held_id: int  # held by the hold
    waiter_id: int  # the armer's session, waiting on the held one


def deadlocks(db: DBSession, holds: Sequence[OperatorHold], now: datetime) -> list[Deadlock]:
    """Pairs that wait on each other: a held session, and its hold's armer session — or a session
    of the person who armed it — that waits on the held one (a prerequisite), or that is itself
    the held one (a session holding itself waits on its own end)."""
    found: list[Deadlock] = []
    policy = load_policy(db)
    for hold in holds:
        armer_sid = armer_session_id(hold.armer)
        if armer_sid is not None:
            waiters = [s for s in [db.get(Session, armer_sid)] if s is not None]
        else:
            active = [s.value for s in ACTIVE_STATUSES]
            waiters = list(
                db.exec(select(Session).where(Session.requester == hold.armer, col(Session.status).in_(active)))
            )
        for waiter in waiters:
            if armer_sid is not None and waiter.status == Status.WAITING.value and applies(hold, waiter, now, policy):
                found.append(Deadlock(hold.id or 0, hold.armer, waiter.id or 0, waiter.id or 0))
            for prereq in db.exec(select(Prerequisite).where(Prerequisite.session_id == waiter.id)):
                for target in target_sessions(db, prereq.target_kind, prereq.target_ref):
                    if target.id == waiter.id or target.status != Status.WAITING.value:
                        continue
                    if applies(hold, target, now, policy) and waits_on(db, waiter.id or 0, target):
                        found.append(Deadlock(hold.id or 0, hold.armer, target.id or 0, waiter.id or 0))
    return found


def notice_deadlocks(
    ctx: Context, db: DBSession, holds: Sequence[OperatorHold], now: datetime, effects: Effects
) -> list[Deadlock]:
    """Tell people about each deadlock once: the ops channel and the two sessions' threads (the
    notifiers read `hold_deadlock`), recorded on the hold's row so neither another process nor a
    restart tells it again."""
    raised = []
    for pair in deadlocks(db, holds, now):
        if not _recorded(db, pair, now):
            continue
        raised.append(pair)
        held = db.get(Session, pair.held_id)
        sentence = render("text/hold_deadlock.j2", d=pair, held=held)
        effects.notice("hold_deadlock", hold_id=pair.hold_id, armer=pair.armer, held_session_id=pair.held_id,
                  waiting_session_id=pair.waiter_id, sentence=sentence)
        log.warning("hold deadlock: %s", sentence)
    return raised



def _recorded(db: DBSession, pair: Deadlock, now: datetime) -> bool:
    """Record the deadlock on its hold's row, locked; True when this call wrote it, so two
    processes finding the same deadlock cannot both tell it."""
    hold = db.get(OperatorHold, pair.hold_id, with_for_update=True, populate_existing=True)
    told = [list(p) for p in (hold.deadlocks_told or [])] if hold is not None else []
    if hold is None or [pair.held_id, pair.waiter_id] in told:
        return False
    hold.deadlocks_told = [*told, [pair.held_id, pair.waiter_id]]
    db.add(hold)
    db.flush()
    return True
