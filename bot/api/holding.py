"""/api/v1 pause, operator holds and queue resume: the REST doors to the engine functions
`/pacer pause`, `hold`, `release` and `resume` call, so the API can do what chat can.

    POST /sessions/{id}/pause      until given: sleep to then (scheduler.pauses.sleep.wake_me_up_later);
                                   else park in the spot queue (scheduler.pauses.parking.pause_into_spot_queue),
                                   halt: stopping the running turn; resume_prompt: what it comes back to
    POST /holds                    place an operator hold (scheduler.holds.operator.place_hold)
    POST /holds/{id}/release       release one (scheduler.holds.operator.release_hold)
    POST /queue/resume             resume a held queue (scheduler.holds.queue.resume_queue)

The request and answer shapes live here, beside the routes that alone use them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from bot.api.fields import Prompt, SessionId, Text
from bot.api.fields import Request as Body
from bot.api.guard import ApiError, CallerDep, GuardedRoute
from bot.api.models import SessionDetail
from bot.api.refusals import refusals
from bot.api.views import context, session_detail
from bot.chat.roles import Role
from scheduler import bounds
from scheduler.errors import InvalidInput
from scheduler.front import (
    MAX_REASON,
    MAX_RESUME_PROMPT_CHARS,
    MAX_TTL,
    Genesis,
    get_session,
    load_policy,
    pause_into_spot_queue,
    place_hold,
    release_hold,
    resume_queue,
    session_scope,
    wake_me_up_later,
)
from templates import error_text

router = APIRouter(route_class=GuardedRoute, tags=["holds"])

HoldId = Annotated[int, Path(ge=1, le=bounds.MAX_ID, description="An operator hold id")]
_ID = r"#?[1-9][0-9]{0,8}"
# The selectors `/pacer hold` takes, in the same words; whether a named session or trigger exists
# is the server's to say (404).
SELECTOR = (
    rf"^(all|{_ID}(,{_ID}){{0,49}}|genesis:({'|'.join(g.value for g in Genesis)})|class:(priority|spot)|trigger:{_ID}"
    rf"|repo:{bounds.OWNER_PATTERN}/{bounds.NAME_PATTERN}|label:[A-Za-z0-9._/+-]{{1,100}})$"
)
KINDS = {"genesis": "genesis", "class": "class", "trigger": "trigger", "repo": "repository", "label": "label"}


class PauseCreate(Body):
    # A sleep lets its turn finish: halt goes with a park only, as the document says.
    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"until": {"type": "string"}}, "required": ["until"]},
        "then": {"properties": {"halt": {"const": False}}},
    })

    until: AwareDatetime | None = Field(
        None,
        strict=False,
        description="Sleep until then (ISO 8601 with an offset, in the future); omit to park in the spot queue",
    )
    halt: bool = Field(
        False,
        description="A park only: stop the running turn where it stands (that pause is counted); "
        "false lets the turn finish first",
    )
    resume_prompt: Prompt | None = Field(
        None,
        max_length=MAX_RESUME_PROMPT_CHARS,
        description="The prompt the session is given when it comes back (the sweep reaches the park, or the "
        "sleep's wake), in place of the nudge to pick up where it left off",
    )


class Paused(BaseModel):
    session: SessionDetail
    until: datetime | None = Field(description="When it wakes; null for a park, which waits for a resume")
    sentence: str | None = Field(description="What the park did, as chat says it; null for a sleep")


class HoldCreate(Body):
    model_config = ConfigDict(regex_engine="python-re")  # the repository rule looks ahead

    selector: str = Field(
        pattern=SELECTOR,
        description="As /pacer hold takes it: #12 or 12,14 (sessions), genesis:<genesis>, "
        "class:priority|spot, trigger:<id>, repo:<owner/name>, label:<name> or all",
    )
    ttl_seconds: int | None = Field(
        None, ge=1, le=int(MAX_TTL.total_seconds()), description="Omit to hold until released"
    )
    reason: Text = Field("", max_length=MAX_REASON)

    def kind_and_values(self) -> tuple[str, list[str]]:
        if self.selector == "all":
            return "all", []
        prefix, sep, value = self.selector.partition(":")
        if not sep:
            return "session", [part.lstrip("#") for part in self.selector.split(",")]
        return KINDS[prefix], [value.lstrip("#") if prefix == "trigger" else value]


class HoldPlaced(BaseModel):
    hold_id: int
    selector_kind: str
    selector_value: str
    armer: str
    reason: str
    expires_at: datetime | None


class HoldReleased(BaseModel):
    hold_id: int
    armer: str
    released_by: str | None


class ResumeCreate(Body):
    group: Text | None = Field(None, max_length=100, description="A concurrency group; omit for the whole queue")


class Resumed(BaseModel):
    sentence: str


def _detail(request: Request, session_id: int) -> dict[str, Any]:
    ctx = context(request)
    with session_scope(ctx.engine) as db:
        return session_detail(db, get_session(db, session_id), load_policy(db), ctx.clock.now())


@router.post("/sessions/{session_id}/pause", response_model=Paused, responses=refusals(404, 409, 422, 503),
             summary="Sleep a session until a time, or park it in the spot queue")
def pause(session_id: SessionId, request: Request, who: CallerDep, body: PauseCreate | None = None) -> dict[str, Any]:
    ctx = context(request)
    with session_scope(ctx.engine) as db:
        who.require_owner(f"pausing session #{session_id}", get_session(db, session_id).requester)
    body = body or PauseCreate(until=None, halt=False, resume_prompt=None)
    if body.until is not None:
        if body.halt:
            raise InvalidInput(error_text("holding/halt_with_until"), field="halt")
        if body.until <= ctx.clock.now():
            # A time the clock has passed: the request is well formed, the present refuses it.
            raise ApiError(409, "conflict", error_text("holding/until_past", until=body.until), field="until")
        at = wake_me_up_later(ctx, session_id, body.until, body.resume_prompt)
        return {"session": _detail(request, session_id), "until": at, "sentence": None}
    parked = pause_into_spot_queue(ctx, session_id, resume_prompt=body.resume_prompt, halt=body.halt)
    return {"session": _detail(request, session_id), "until": None, "sentence": parked.sentence}


@router.post("/holds", response_model=HoldPlaced, status_code=201, responses=refusals(404, 422, 503),
             summary="Place an operator hold on the sessions a selector names")
def place(body: HoldCreate, request: Request, who: CallerDep) -> dict[str, Any]:
    ttl = timedelta(seconds=body.ttl_seconds) if body.ttl_seconds is not None else None
    kind, values = body.kind_and_values()
    # As `/pacer hold` is judged: a member holds only sessions they requested.
    if kind != "session":
        who.require_operator(f"holding {body.selector}")
    elif who.role is not Role.OPERATOR:
        with session_scope(context(request).engine) as db:
            for value in values:
                who.require_owner(f"holding session #{value}", get_session(db, int(value)).requester)
    hold = place_hold(context(request), kind, values, armer=who.name, reason=body.reason, ttl=ttl)
    return {"hold_id": hold.id, "selector_kind": hold.selector_kind, "selector_value": hold.selector_value,
            "armer": hold.armer, "reason": hold.reason, "expires_at": hold.expires_at}


@router.post("/holds/{hold_id}/release", response_model=HoldReleased, responses=refusals(404, 409, 422, 503),
             summary="Release an operator hold (another person's needs the operator role)")
def release(hold_id: HoldId, request: Request, who: CallerDep) -> dict[str, Any]:
    hold = release_hold(context(request), hold_id, actor=who.name, actor_role=who.role.value)
    return {"hold_id": hold_id, "armer": hold.armer, "released_by": hold.released_by}


@router.post("/queue/resume", response_model=Resumed, responses=refusals(409, 422, 503),
             summary="Resume a held queue, or one concurrency group")
def resume(request: Request, who: CallerDep, body: ResumeCreate | None = None) -> dict[str, Any]:
    who.require_operator("resuming the queue")
    result = resume_queue(context(request), body.group if body is not None else None, actor=who.name)
    return {"sentence": result.sentence}
