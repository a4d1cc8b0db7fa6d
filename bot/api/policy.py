"""/api/v1/policy and /api/v1/holds.

GET /policy shows the policy row, the gate card (what the gate would decide for a spot session
now, with the windows, reserve, burn, sustainable rate, the ceiling that holds and what lifts
it — `scheduler.steering.gate_card`, the same builder `pacer policy` and the App Home render) and the
recent audit lines. PATCH /policy goes through `scheduler.store.policy.set_policy`, as `/pacer policy
set` does, with surface `api`: a bad value changes nothing, and every change writes one audit
line and asks for a queue pass.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import fields, is_dataclass
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from sqlmodel import Session as DBSession
from sqlmodel import col, or_, select

from bot.api.guard import CallerDep, GuardedRoute
from bot.api.models import HoldsOut, PolicyChanged, PolicyOut, PolicyPatch, SpendReset
from bot.api.refusals import refusals
from bot.api.views import context
from bot.chat.gate_view import spot_runtime
from scheduler.engine.fleet import read_quota
from scheduler.holds.budgets import reset_spend, spends
from scheduler.rules.top_up import TOP_UP_ATTRIBUTES
from scheduler.rules.waiting import waiting_reason
from scheduler.steering.gate_card import build_card
from scheduler.store.db import session_scope
from scheduler.store.models import OperatorHold, Policy, QueueHold, Session, Status
from scheduler.store.policy import audit_log, ensure_policy, load_policy, set_policy

router = APIRouter(route_class=GuardedRoute, tags=["policy"])

AUDIT_LINES = 10


def _row(db: DBSession, row: Policy) -> dict[str, Any]:
    spent = spends(db, load_policy(db), [])
    return {
        "gating_enabled": row.gating_enabled,
        "reserve_5h_pct": row.reserve_5h_pct,
        "reserve_7d_pct": row.reserve_7d_pct,
        "max_sessions": row.max_sessions,
        "max_sessions_override": row.max_sessions_override,
        "max_sessions_override_until": row.max_sessions_override_until,
        "preemption_enabled": row.preemption_enabled,
        "genesis_class_overrides": dict(row.genesis_class_overrides or {}),
        "cost_budgets": dict(row.cost_budgets or {}),
        "spend": [{"runtime": s.runtime, "spent": round(s.spent, 2), "budget": s.budget,
                   "since": s.since.isoformat() if s.since else None, "over": s.is_over} for s in spent],
        **{key: getattr(row, key) for key in TOP_UP_ATTRIBUTES},
    }


@router.get("/policy", response_model=PolicyOut, responses=refusals(503),
            summary="The policy and what the gate would decide for a spot session now")
def read_policy(request: Request) -> dict[str, Any]:
    ctx = context(request)
    now = ctx.clock.now()
    reading = read_quota(ctx, now)  # before the transaction: a quota source may open its own
    with session_scope(ctx.engine) as db:
        card = build_card(db, ctx, reading, now, runtime=spot_runtime(request.app.state.pacer.settings))
        row = _row(db, ensure_policy(db))
        audit = [a.line for a in audit_log(db, AUDIT_LINES)]
    return {"policy": row, "gate": card.as_dict(), "audit": audit}


def _merged_map(changes: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A map field of the PATCH: null clears the map in force; a map is returned to be merged onto
    it (a null value there removes one entry)."""
    if key not in changes:
        return None
    given = changes.pop(key)
    if given is None:
        changes[key] = {}
        return None
    return dict(given)


@router.patch("/policy", response_model=PolicyChanged, responses=refusals(422, 503), summary="Change the policy (audited)")
def patch_policy(body: PolicyPatch, request: Request, who: CallerDep) -> dict[str, Any]:
    who.require_operator("changing the policy")
    ctx = context(request)
    changes: dict[str, Any] = body.model_dump(exclude_unset=True)
    overrides = _merged_map(changes, "genesis_class_overrides")
    budgets = _merged_map(changes, "cost_budgets")
    temporary: dict[str, Any] = {key: changes.pop(key) for key in ("max_sessions_override", "max_sessions_override_until") if key in changes}
    for key in [k for k, v in changes.items() if v is None]:
        changes.pop(key)
    changes.update(temporary)  # null clears a temporary max sessions
    audit = set_policy(ctx, changes, overrides=overrides, budgets=budgets, surface="api", actor=who.name)
    with session_scope(ctx.engine) as db:
        row = _row(db, ensure_policy(db))
    return {"policy": row, "audit": audit.line if audit is not None else None}


@router.post("/policy/reset-spend", response_model=PolicyChanged, responses=refusals(422, 503),
             summary="Count a runtime's spend against its cost budget from now (audited)")
def post_reset_spend(body: SpendReset, request: Request, who: CallerDep) -> dict[str, Any]:
    who.require_operator("resetting the spend")
    ctx = context(request)
    audit = reset_spend(ctx, body.runtime, surface="api", actor=who.name)
    with session_scope(ctx.engine) as db:
        row = _row(db, ensure_policy(db))
    return {"policy": row, "audit": audit.line or None}


# --------------------------------------------------------------------------- holds


def _plain(value: Any) -> Any:
    """A read model's dataclasses as JSON-ready values."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _records(db: DBSession, now: datetime) -> dict[str, Any]:
    """Without `scheduler.holds.view`: the queue and operator hold rows, and each waiting
    session's hold, pause, park and sleep records, headline first."""
    queue = db.exec(select(QueueHold).where(col(QueueHold.released_at).is_(None)).order_by(col(QueueHold.since)))
    operator = db.exec(
        select(OperatorHold).where(
            col(OperatorHold.released_at).is_(None),
            or_(col(OperatorHold.expires_at).is_(None), col(OperatorHold.expires_at) > now),
        ).order_by(col(OperatorHold.created_at))
    )
    parked = db.exec(
        select(Session).where(
            Session.status == Status.WAITING.value,
            or_(col(Session.hold_reason).is_not(None), col(Session.pause_reason).is_not(None),
                col(Session.park_reason).is_not(None), col(Session.wake_at) > now),
        ).order_by(col(Session.id))
    )
    sessions = []
    for s in parked:
        reason = waiting_reason(s, now)
        records = ([reason.headline] if reason.headline else []) + [loser.mechanism for loser in reason.others]
        sessions.append({"id": s.id, "title": s.title, "records": _plain(records)})
    return {
        "queue_holds": [q.model_dump() for q in queue],
        "operator_holds": [o.model_dump() for o in operator],
        "sessions": sessions,
        "sessions_not_shown": 0,
    }


def _holds_view() -> Any | None:
    """`scheduler.holds.view` (every hold kind in one read model), when that module exists."""
    if importlib.util.find_spec("scheduler.holds.view") is None:
        return None
    module = importlib.import_module("scheduler.holds.view")
    return module if hasattr(module, "all_holds") else None


@router.get("/holds", response_model=HoldsOut, responses=refusals(503), summary="Every hold: queue holds, operator holds, held sessions")
def list_holds(request: Request) -> dict[str, Any]:
    ctx = context(request)
    now = ctx.clock.now()
    view = _holds_view()
    with session_scope(ctx.engine) as db:
        if view is not None:
            found = view.all_holds(db, now)
            return {
                "source": "holds_view",
                "queue_holds": _plain(found.queue_holds),
                "operator_holds": _plain(found.operator_holds),
                "sessions": _plain(found.sessions),
                "sessions_not_shown": found.sessions_not_shown,
                "cycling": _plain(found.cycling),
            }
        return {"source": "records", **_records(db, now)}
