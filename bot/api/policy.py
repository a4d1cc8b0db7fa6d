"""/api/v1/policy, /api/v1/burn and /api/v1/holds.

GET /policy shows the policy row, the gate card (what the gate would decide for a spot session
now, with the windows, reserve, burn, sustainable rate, the ceiling that holds and what lifts
it — `scheduler.steering.gate_card`, the same builder `pacer policy` and the App Home render) and the
recent audit lines. GET /burn is the $/min table `/pacer burn` shows (`scheduler.steering.burn_view`).
PATCH /policy goes through `scheduler.store.policy.set_policy`, as `/pacer policy
set` does, with surface `api`: a bad value changes nothing, and every change writes one audit
line and asks for a queue pass.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

from fastapi import APIRouter, Request
from sqlmodel import Session as DBSession

from bot.api.guard import ApiError, CallerDep, GuardedRoute
from bot.api.policy_models import BurnOut, HoldsOut, PolicyChanged, PolicyOut, PolicyPatch, SpendReset
from bot.api.refusals import refusals
from bot.api.views import context
from bot.chat.gate_view import spot_runtime
from scheduler.front import (
    MAX_OVERRIDE_FOR,
    PROJECTION_MINUTES,
    TOP_UP_ATTRIBUTES,
    Policy,
    all_holds,
    audit_log,
    build_card,
    burn_rows,
    ensure_policy,
    load_policy,
    read_quota,
    reset_spend,
    session_scope,
    set_policy,
    spends,
)
from templates import error_text

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
        "demand_pacing_enabled": row.demand_pacing_enabled,
        "overage_spot_enabled": row.overage_spot_enabled,
        "window_reserves": dict(row.window_reserves or {}),
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


@router.get("/burn", response_model=BurnOut, responses=refusals(503),
            summary="The $/min each runtime + model burns, as the gate projects with it")
def read_burn(request: Request) -> dict[str, Any]:
    rates = [{"runtime": r.runtime, "model": r.model, "usd_per_minute": r.usd_per_minute,
              "projected_usd": r.usd_per_minute * PROJECTION_MINUTES, "turns": r.turns, "source": r.source.value}
             for r in burn_rows(context(request))]
    return {"projection_minutes": PROJECTION_MINUTES, "rates": rates}


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


def _expiry_ahead(ctx: Any, changes: dict[str, Any]) -> None:
    """A temporary max sessions' expiry is ahead of now and at most a week away: the document
    says it is a time, only the clock can say where it falls, so a 409 names it (set_policy
    would refuse it too, as any surface's bad value)."""
    until = changes.get("max_sessions_override_until")
    if until is None:
        return
    value = changes.get("max_sessions_override", ...)
    if value is ...:
        with session_scope(ctx.engine) as db:
            value = ensure_policy(db).max_sessions_override
    now = ctx.clock.now()
    if value is not None and not now < until <= now + MAX_OVERRIDE_FOR:
        message = error_text("policy/override_needs_expiry", most=MAX_OVERRIDE_FOR)
        raise ApiError(409, "conflict", message, field="max_sessions_override_until")


@router.patch(
    "/policy", response_model=PolicyChanged, responses=refusals(409, 422, 503), summary="Change the policy (audited)"
)
def patch_policy(body: PolicyPatch, request: Request, who: CallerDep) -> dict[str, Any]:
    who.require_operator("changing the policy")
    ctx = context(request)
    changes: dict[str, Any] = body.model_dump(exclude_unset=True)
    _expiry_ahead(ctx, changes)
    overrides = _merged_map(changes, "genesis_class_overrides")
    budgets = _merged_map(changes, "cost_budgets")
    reserves = _merged_map(changes, "window_reserves")
    temporary: dict[str, Any] = {
        key: changes.pop(key) for key in ("max_sessions_override", "max_sessions_override_until") if key in changes
    }
    for key in [k for k, v in changes.items() if v is None]:
        changes.pop(key)
    changes.update(temporary)  # null clears a temporary max sessions
    merge = {
        "genesis_class_overrides": overrides or {}, "cost_budgets": budgets or {}, "window_reserves": reserves or {}
    }
    audit = set_policy(ctx, changes, merge=merge, surface="api", actor=who.name)
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


@router.get(
    "/holds",
    response_model=HoldsOut,
    responses=refusals(503),
    summary="Every hold: queue holds, operator holds, held sessions",
)
def list_holds(request: Request) -> dict[str, Any]:
    ctx = context(request)
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        found = all_holds(db, now)
        return {
            "source": "holds_view",
            "queue_holds": _plain(found.queue_holds),
            "operator_holds": _plain(found.operator_holds),
            "sessions": _plain(found.sessions),
            "sessions_not_shown": found.sessions_not_shown,
            "cycling": _plain(found.cycling),
        }
