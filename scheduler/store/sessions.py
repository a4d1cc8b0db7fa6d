"""Sessions: their resolved class, lookups, and creation with lineage. Thin over the database;
the rules are the pure functions in `genesis` and `precedence`. Where a session stands in the
queue (its precedence, a class change, the ranked queue) is `ranking`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import case, func, insert, literal
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler import bounds
from scheduler.errors import InvalidInput, NotFound
from scheduler.rules import precedence as prec
from scheduler.rules.genesis import (
    DEFAULT_CLASS,
    Genesis,
    SchedulingClass,
    genesis_default,
    inherit,
    parse_class,
    parse_genesis,
    resolve_class,
)
from scheduler.rules.snapshot import PolicyView
from scheduler.store.models import ACTIVE_STATUSES, SESSIONS, Session, Status, Trigger
from scheduler.store.policy import load_policy
from scheduler.store.prerequisite_rows import parse_prerequisites, record_prerequisites
from templates import error_text


def class_of(session: Session, policy: PolicyView) -> SchedulingClass:
    """The resolved class, derived on every read when the column is NULL."""
    return class_from(session.scheduling_class, session.genesis, policy)


def class_from(own: str | None, genesis: str | None, policy: PolicyView) -> SchedulingClass:
    """`class_of` from the two columns it reads, for reads that carry columns, not rows."""
    return resolve_class(parse_class(own), None, parse_genesis(genesis), policy.overrides)


def is_spot(session: Session, policy: PolicyView) -> bool:
    return class_of(session, policy) is SchedulingClass.SPOT


def class_defaults(policy: PolicyView) -> tuple[SchedulingClass, ...]:
    """Each genesis's class under this policy, in `DEFAULT_CLASS` order: what `class_expr`
    depends on, and so a key for statements built from it."""
    return tuple(genesis_default(g, policy.overrides) for g in DEFAULT_CLASS)


def class_expr(policy: PolicyView) -> ColumnElement[str]:
    """The same resolution as `class_of`, as SQL, so filters and ordering run in the database."""
    return class_expr_for(class_defaults(policy))


@lru_cache(maxsize=16)
def class_expr_for(defaults: tuple[SchedulingClass, ...]) -> ColumnElement[str]:
    """Built once per set of defaults: the CASE is a dozen clauses, and a statement built from
    the same expression object reuses its compiled form without rebuilding its cache key."""
    by_genesis = case(
        *[
            (col(Session.genesis) == g.value, literal(cls.value))
            for g, cls in zip(DEFAULT_CLASS, defaults, strict=True)
        ],
        else_=literal(DEFAULT_CLASS[Genesis.UNKNOWN].value),
    )
    return func.coalesce(col(Session.scheduling_class), by_genesis)


def get_session(db: DBSession, session_id: int) -> Session:
    row = db.get(Session, session_id)
    if row is None:
        raise NotFound(error_text("sessions/not_found", session_id=session_id))
    return row


def get_trigger(db: DBSession, trigger_id: int) -> Trigger:
    row = db.get(Trigger, trigger_id)
    if row is None:
        raise NotFound(error_text("sessions/trigger_not_found", trigger_id=trigger_id))
    return row


def spot_top(db: DBSession, policy: PolicyView, *, exclude_id: int | None = None) -> list[int]:
    """The highest spot precedence among queued (non-finished) sessions, as a 0-or-1 list."""
    stmt = select(func.max(Session.precedence)).where(
        class_expr(policy) == SchedulingClass.SPOT.value,
        col(Session.status).in_([s.value for s in ACTIVE_STATUSES]),
    )
    if exclude_id is not None:
        stmt = stmt.where(col(Session.id) != exclude_id)
    top = db.exec(stmt).one()
    return [] if top is None else [int(top)]


def top_of_spot(db: DBSession, policy: PolicyView, session: Session | None = None) -> int:
    if session is None or session.id is None:
        return prec.above_top_spot(spot_top(db, policy))
    return prec.above_top_spot(spot_top(db, policy, exclude_id=session.id), current=session.precedence)


@dataclass(frozen=True)
class NewSession:
    """What a surface asks for. Validated here before anything is written."""

    title: str = ""
    genesis: str | None = None  # declared genesis; None means inherit or the surface's default
    scheduling_class: str | None = None
    precedence: int | None = None
    place: str | None = None
    parent_id: int | None = None
    forked_from_id: int | None = None
    trigger_id: int | None = None
    bookkeeping: bool = False
    runtime: str = "echo"
    weight: float = 1.0
    capacity: int | None = None
    capacity_multiplier: float | None = None
    cost_cap_usd: float | None = None
    concurrency_group: str | None = None
    requester: str | None = None
    source: dict[str, Any] | None = None
    repository: str | None = None  # "owner/name"; None: the trigger's, else none
    # What a person wrote to start it (a Slack message, `/pacer new`, an API prompt): its
    # `depends on #n` and `@#n` are the session's prerequisites (seed 002).
    declares: str = ""


def validate_new(req: NewSession) -> None:
    if req.genesis is not None and req.genesis not in {g.value for g in Genesis}:
        allowed = [g.value for g in Genesis]
        raise InvalidInput(
            error_text("sessions/genesis_unknown", genesis=req.genesis, allowed=allowed), field="genesis"
        )
    parse_class(req.scheduling_class)
    prec.resolve_placement(precedence=req.precedence, place=req.place)
    if req.precedence is not None:
        bounds.check_int(req.precedence, "precedence", -bounds.MAX_PRECEDENCE, bounds.MAX_PRECEDENCE)
    bounds.check_claim(req.weight, req.capacity, req.capacity_multiplier)
    bounds.check_cost_cap(req.cost_cap_usd)
    if req.parent_id is not None and req.forked_from_id is not None:
        raise InvalidInput(error_text("sessions/parent_and_fork"), field="parent_id")
    if req.repository is not None:
        bounds.check_repository(req.repository)


def new_row(
    db: DBSession,
    req: NewSession,
    *,
    now: datetime,
    fallback: Genesis = Genesis.UNKNOWN,
    trigger: Trigger | None = None,
) -> dict[str, Any]:
    """The columns a new session starts with: lineage, class and precedence resolved. Reads the
    parent and the trigger only when the request names them (pass `trigger` when already read),
    and the policy only for top_of_spot."""
    validate_new(req)
    lineage_parent = None
    if req.parent_id is not None:
        lineage_parent = get_session(db, req.parent_id)
    elif req.forked_from_id is not None:
        lineage_parent = get_session(db, req.forked_from_id)
    if trigger is None and req.trigger_id is not None:
        trigger = get_trigger(db, req.trigger_id)

    lineage = inherit(
        declared_genesis=Genesis(req.genesis) if req.genesis else None,
        parent_genesis=parse_genesis(lineage_parent.genesis) if lineage_parent else None,
        parent_class=parse_class(lineage_parent.scheduling_class) if lineage_parent else None,
        declared_class=parse_class(req.scheduling_class),
        trigger_class=parse_class(trigger.scheduling_class) if trigger else None,
        fallback=fallback,
    )
    placement = prec.resolve_placement(precedence=req.precedence, place=req.place)
    if placement == prec.TOP_OF_SPOT:
        precedence = top_of_spot(db, load_policy(db))
    elif isinstance(placement, int):
        precedence = placement
    elif trigger is not None and trigger.precedence is not None:
        precedence = trigger.precedence
    elif lineage_parent is not None:
        precedence = prec.spawn_precedence(lineage_parent.precedence, bookkeeping=req.bookkeeping)
    else:
        precedence = prec.DEFAULT_PRECEDENCE
    return {
        "title": req.title[:200],
        "genesis": lineage.genesis.value,
        "scheduling_class": lineage.scheduling_class.value if lineage.scheduling_class else None,
        "class_from_trigger": lineage.class_from_trigger,
        "trigger_id": trigger.id if trigger is not None else None,
        "parent_id": req.parent_id,
        "forked_from_id": req.forked_from_id,
        "bookkeeping": req.bookkeeping,
        "runtime": req.runtime,
        "weight": req.weight,
        "capacity": req.capacity,
        "capacity_multiplier": req.capacity_multiplier,
        "cost_cap_usd": req.cost_cap_usd if req.cost_cap_usd is not None else _trigger_cap(trigger),
        "concurrency_group": req.concurrency_group or (trigger.concurrency_group if trigger else None),
        "requester": req.requester,
        "source": dict(req.source or {}),
        "repository": _repository(req.repository or _trigger_repository(trigger)),
        "status": Status.WAITING.value,
        "precedence": precedence,
        "created_at": now,
        "updated_at": now,
    }


def _repository(named: str | None) -> str | None:
    """The repository as every key takes it (`bounds.check_repository`): in lower case."""
    return bounds.check_repository(named) if named is not None else None


def _trigger_repository(trigger: Trigger | None) -> str | None:
    """The repository a trigger's sessions work in (`config.repository`, checked when written)."""
    found = (trigger.config or {}).get("repository") if trigger is not None else None
    return found if isinstance(found, str) else None


def _trigger_cap(trigger: Trigger | None) -> float | None:
    """The cost cap a trigger's sessions start with (`config.cost_cap_usd`, checked when written)."""
    found = (trigger.config or {}).get("cost_cap_usd") if trigger is not None else None
    return float(found) if isinstance(found, (int, float)) and not isinstance(found, bool) else None


def create_session(db: DBSession, req: NewSession, *, now: datetime, fallback: Genesis = Genesis.UNKNOWN) -> Session:
    session = Session(**new_row(db, req, now=now, fallback=fallback))
    db.add(session)
    db.flush()
    if req.declares and parse_prerequisites(req.declares):  # most declare none: spare two queries
        record_prerequisites(db, session, req.declares)
    return session


_INSERT_SESSION = insert(SESSIONS)
# The model's factory defaults (the JSON columns) have no column default: a Core insert names
# them. Read from the model, so a new such column needs no change here.
_FACTORY_DEFAULTS = tuple(
    (name, info.default_factory) for name, info in Session.model_fields.items() if info.default_factory is not None
)


def insert_session(
    db: DBSession, req: NewSession, *, now: datetime, prompt: str | None = None, trigger: Trigger | None = None,
    fallback: Genesis = Genesis.UNKNOWN,
) -> int:
    """The row `create_session` writes, with its first prompt, in one Core INSERT: for intake
    that needs no ORM object and takes bursts (a webhook relabel of a thousand issues). Returns
    the new session's id."""
    # pydantic types default_factory as possibly taking the validated data; Session's take none.
    row: dict[str, Any] = {name: factory() for name, factory in _FACTORY_DEFAULTS}  # type: ignore[call-arg]
    row.update(new_row(db, req, now=now, fallback=fallback, trigger=trigger))
    if prompt is not None:
        row["prompt"] = prompt
    key = db.connection().execute(_INSERT_SESSION, row).inserted_primary_key
    if key is None or key[0] is None:
        raise RuntimeError("the session insert returned no id")
    return int(key[0])
