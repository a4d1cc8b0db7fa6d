"""/api/v1/triggers: create, read, change, delete and invoke triggers.

Writes need the operator role when X-Pacer-Actor names a human (as `/pacer trigger` does in
Slack). A class change reports `reclassified_waiting_sessions` — how many of this trigger's
still-waiting sessions actually moved between classes — and the promoted ones are released by
the `trigger_release` alarm, armed after the write committed, never inside this request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from sqlmodel import col, select

from bot.api.fields import TriggerId, TriggerKind
from bot.api.guard import ApiError, CallerDep, GuardedRoute
from bot.api.models import (
    TriggerChanged,
    TriggerCreate,
    TriggerDeleted,
    TriggerInvoke,
    TriggerInvoked,
    TriggerList,
    TriggerOut,
    TriggerPatch,
)
from bot.api.refusals import refusals
from bot.api.views import context, session_detail, submission_out
from bot.triggers import writes as store
from bot.triggers.kind_config import check_config
from bot.triggers.spec import KINDS, check_spec
from scheduler.errors import InvalidInput
from scheduler.front import Trigger, TriggerEvent, fire, get_session, get_trigger, load_policy, session_scope
from templates import error_text

router = APIRouter(route_class=GuardedRoute, tags=["triggers"])


def _after(request: Request, writes: Sequence[tuple[int, Sequence[int]]] = ()) -> None:
    pacer = request.app.state.pacer
    store.after_write(context(request), pacer.scheduler, pacer.engine, writes)


@router.post(
    "/triggers",
    response_model=TriggerOut,
    status_code=201,
    responses=refusals(409, 422, 503),
    summary="Create a trigger",
)
def create(body: TriggerCreate, request: Request, who: CallerDep) -> dict[str, Any]:
    who.require_operator("creating a trigger")
    ctx = context(request)
    spec = check_spec(body.model_dump())
    with session_scope(ctx.engine) as db:
        write = store.create_trigger(db, spec, now=ctx.clock.now())
        out = store.plain(write.trigger, sessions=0)
    _after(request)
    return out


@router.get("/triggers", response_model=TriggerList, responses=refusals(422, 503), summary="List triggers")
def list_triggers(request: Request, kind: Annotated[TriggerKind | None, Query()] = None) -> dict[str, Any]:
    ctx = context(request)
    with session_scope(ctx.engine) as db:
        stmt = select(Trigger).order_by(col(Trigger.id))
        if kind is not None:
            stmt = stmt.where(Trigger.kind == kind)
        rows = [store.plain(t, sessions=store.session_count(db, t.id or 0)) for t in db.exec(stmt)]
    return {"count": len(rows), "triggers": rows}


@router.get("/triggers/{trigger_id}", response_model=TriggerOut, responses=refusals(404, 422, 503), summary="A trigger")
def read(trigger_id: TriggerId, request: Request) -> dict[str, Any]:
    ctx = context(request)
    with session_scope(ctx.engine) as db:
        return store.plain(get_trigger(db, trigger_id), sessions=store.session_count(db, trigger_id))


@router.patch("/triggers/{trigger_id}", response_model=TriggerChanged, responses=refusals(404, 409, 422, 503),
              summary="Change a trigger (a class change moves its waiting sessions)")
def patch(trigger_id: TriggerId, body: TriggerPatch, request: Request, who: CallerDep) -> dict[str, Any]:
    who.require_operator(f"changing trigger #{trigger_id}")
    ctx = context(request)
    changes = body.model_dump(exclude_unset=True)
    if "kind" in changes:  # any kind is a valid value; this trigger's own is the only one it takes
        with session_scope(ctx.engine) as db:
            kind = get_trigger(db, trigger_id).kind
        if changes["kind"] != kind:
            message = error_text("triggers/kind_change", old=kind, new=changes["kind"])
            raise ApiError(409, "conflict", message, field="kind")
    if "config" in changes:
        _fits_its_kind(ctx, trigger_id, changes["config"])
    change = store.change_trigger(ctx, request.app.state.pacer.scheduler, trigger_id, changes, actor=who.name)
    write = change.write
    return {
        "trigger": change.after,
        "changed": list(write.changed),
        "reclassified_waiting_sessions": write.moved,
        "released": list(write.promoted),
    }


def _fits_its_kind(ctx: Any, trigger_id: int, config: Any) -> None:
    """A change's config may fit another kind than the trigger's own (the document takes any
    kind's when the change names none): that is a 409, naming the kind it fits."""
    with session_scope(ctx.engine) as db:
        kind = get_trigger(db, trigger_id).kind
    try:
        check_config(kind, config)
    except InvalidInput as exc:
        fits = [other for other in KINDS if other != kind and _takes(other, config)]
        if fits:
            message = error_text("triggers/config_other_kind", kind=kind, fits=fits, problem=str(exc))
            raise ApiError(409, "conflict", message, field=exc.field) from None
        raise


def _takes(kind: str, config: Any) -> bool:
    try:
        check_config(kind, config)
    except InvalidInput:
        return False
    return True


@router.delete(
    "/triggers/{trigger_id}",
    response_model=TriggerDeleted,
    responses=refusals(404, 422, 503),
    summary="Delete a trigger",
)
def delete(trigger_id: TriggerId, request: Request, who: CallerDep) -> dict[str, Any]:
    who.require_operator(f"deleting trigger #{trigger_id}")
    ctx = context(request)
    with session_scope(ctx.engine) as db:
        detached = store.delete_trigger(db, get_trigger(db, trigger_id), now=ctx.clock.now())
    _after(request)
    return {"deleted": trigger_id, "detached_sessions": detached}


@router.post(
    "/triggers/{trigger_id}/invoke",
    response_model=TriggerInvoked,
    status_code=201,
    responses=refusals(404, 409, 422, 503),
    summary="Fire a trigger by hand (api genesis)",
)
def invoke(
    trigger_id: TriggerId, request: Request, who: CallerDep, body: TriggerInvoke | None = None
) -> dict[str, Any]:
    ctx = context(request)
    body = body or TriggerInvoke(title=None)
    event = TriggerEvent(
        "api", body.context, title=body.title, requester=who.name, source={"kind": "invoke", "caller": who.name}
    )
    fired = fire(ctx, trigger_id, event, by_hand=True)
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        detail = session_detail(db, get_session(db, fired.session_id), load_policy(db), now)
    return {"session": detail, "submission": submission_out(fired.submission, now)}
