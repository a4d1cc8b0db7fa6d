"""/api/v1/sessions: create, list, read, change class and rank, start now, archive, stop, post a message.

The same operations the Slack commands and the console perform, over the same scheduler calls:
creation through `bot.api.intake.api_session` (then `submit_turn`), a promotion of a waiting session
through StartNow, archive and stop through `scheduler.engine.lifecycle`, the waiting reason from
`scheduler.rules.waiting`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

import bot.api.idempotency as idempotency
import bot.api.intake as intake
from bot.api.callers import Caller
from bot.api.fields import Documented, GenesisName, SessionId
from bot.api.guard import ApiError, CallerDep, GuardedRoute
from bot.api.models import (
    Archived,
    MessageCreate,
    MessagePosted,
    RestartOut,
    SessionChanged,
    SessionCreate,
    SessionCreated,
    SessionDetail,
    SessionList,
    SessionPatch,
    StartNowOut,
    StoppedOut,
    SummaryOut,
)
from bot.api.refusals import refusals
from bot.api.views import context, ladder_out, session_detail, start_now_out, submission_out
from bot.chat import ladder_view
from scheduler.bounds import check_claim
from scheduler.errors import InvalidInput, PacerError, Refused
from scheduler.front import (
    TOP_OF_SPOT,
    ClaimChange,
    Context,
    NewSession,
    QueueFilter,
    SchedulingClass,
    Session,
    Status,
    archive,
    change_claim,
    change_class,
    class_expr,
    get_session,
    load_policy,
    parse_class,
    ranked_queue,
    record_human_message,
    resolve_placement,
    restart_from_scratch,
    session_scope,
    session_view,
    set_cap,
    set_precedence,
    spends_by,
    start_now,
    stop,
    submit_turn,
    summarize,
)
from templates import error_text

router = APIRouter(route_class=GuardedRoute, tags=["sessions"])

STATUSES = tuple(s.value for s in Status)
LIST_LIMIT = 500
TITLE_CHARS = 80
FINISHED = (Status.DONE.value, Status.ARCHIVED.value)
_ONE_STATUS = "|".join(STATUSES)
STATUS_LIST = f"^({_ONE_STATUS})(,({_ONE_STATUS}))*$"


def _detail(ctx: Context, session_id: int) -> dict[str, Any]:
    with session_scope(ctx.engine) as db:
        session = get_session(db, session_id)
        return session_detail(db, session, load_policy(db), ctx.clock.now())


def _check_prompt(request: Request, text: str, field: str) -> None:
    limit = int(request.app.state.pacer.settings.max_prompt_chars)
    if len(text) > limit:
        raise InvalidInput(error_text("api/prompt_too_long", field=field, length=len(text), limit=limit), field=field)


def _runtime(request: Request, ctx: Context, asked: str | None) -> str:
    settings = request.app.state.pacer.settings
    name = asked or ("echo" if settings.runner == "echo" else settings.runtime_name)
    if name not in ctx.limits.runtimes:
        raise InvalidInput(
            error_text("api/runtime_unknown", name=name, runtimes=sorted(ctx.limits.runtimes)), field="runtime"
        )
    return name


def _lineage_exists(ctx: Context, body: SessionCreate) -> None:
    with session_scope(ctx.engine) as db:
        for field, sid in (("parent_session_id", body.parent_session_id), ("forked_from", body.forked_from)):
            if sid is not None and db.get(Session, sid) is None:
                # A reference to a row that is not there: what the document cannot know, so a 404
                # naming the field, not a 422 for a request the document calls valid.
                message = error_text("api/lineage_not_found", field=field, session_id=sid)
                raise ApiError(404, "not_found", message, field=field)


IdempotencyKey = Annotated[str | None, Header(
    alias=idempotency.HEADER, pattern=idempotency.PATTERN,
    description="Send a create again with the same key after a lost answer: the first answer comes back, not a second "
                "session. 1 to 255 of letters, digits and - _ . : ~ + / =, bare or quoted; kept 24 hours, per caller")]
REPLAYED: dict[int | str, dict[str, Any]] = {
    201: {
        "headers": {
            idempotency.REPLAYED_HEADER: {
                "description": "true: the answer to an earlier request with this Idempotency-Key",
                "schema": {"type": "string", "enum": ["true"]},
            }
        }
    }
}


@router.post(
    "/sessions",
    response_model=SessionCreated,
    status_code=201,
    responses={**refusals(404, 409, 422, 503), **REPLAYED},
    summary="Create a session and submit its first turn",
)
def create(body: SessionCreate, request: Request, who: CallerDep, idempotency_key: IdempotencyKey = None) -> Any:
    ctx = context(request)
    key = idempotency.key_of(idempotency_key)
    fingerprint = idempotency.fingerprint(body) if key is not None else ""
    if key is not None and (
        earlier := idempotency.earlier_answer(ctx.engine, who.name, key, fingerprint, ctx.clock.now())
    ):
        return _replayed(earlier)
    _check_prompt(request, body.prompt, "prompt")
    resolve_placement(precedence=body.precedence, place=body.place)
    if body.parent_session_id is not None and body.forked_from is not None:
        raise InvalidInput(error_text("sessions/parent_and_fork"), field="forked_from")
    runtime = _runtime(request, ctx, body.runtime)
    _lineage_exists(ctx, body)
    request_ = NewSession(
        title=body.title or body.prompt.strip().splitlines()[0][:TITLE_CHARS],
        genesis=body.genesis,
        scheduling_class=body.scheduling_class,
        precedence=body.precedence,
        place=body.place,
        parent_id=body.parent_session_id,
        forked_from_id=body.forked_from,
        runtime=runtime,
        weight=body.weight,
        capacity=body.capacity,
        capacity_multiplier=body.capacity_multiplier,
        cost_cap_usd=body.cost_cap_usd,
        concurrency_group=body.concurrency_group,
        requester=who.name,
        source={"surface": "api", "caller": who.name},
        repository=body.repository,
    )
    claim = idempotency.claim(who.name, key, fingerprint, ctx.clock.now()) if key is not None else None
    try:
        fired = intake.api_session(ctx, request_, body.prompt, also=claim)
    except IntegrityError:
        # Another request with this key made its session first: answer as its retry would be.
        if key is None or not (
            earlier := idempotency.earlier_answer(ctx.engine, who.name, key, fingerprint, ctx.clock.now())
        ):
            raise
        return _replayed(earlier)
    answer = {
        "session": _detail(ctx, fired.session_id),
        "submission": submission_out(fired.submission, ctx.clock.now()),
    }
    if key is not None:
        idempotency.record_answer(
            ctx.engine, who.name, key, SessionCreated.model_validate(answer).model_dump(mode="json")
        )
    return answer


def _replayed(answer: dict[str, Any]) -> JSONResponse:
    return JSONResponse(answer, status_code=201, headers={idempotency.REPLAYED_HEADER: "true"})


@router.get("/sessions", response_model=SessionList, responses=refusals(422, 503),
            summary="List sessions; order=precedence is the ranked queue")
def list_sessions(
    request: Request,
    status: Annotated[
        list[Annotated[str, Documented(pattern=STATUS_LIST)]] | None,
        Query(description=f"Repeat or comma-separate: {', '.join(STATUSES)}"),
    ] = None,
    scheduling_class: Annotated[Literal["priority", "spot"] | None, Query(alias="class")] = None,
    genesis: Annotated[GenesisName | None, Query()] = None,
    order: Annotated[
        Literal["created", "precedence"], Query(description="precedence: priority above, spot by rank")
    ] = "created",
    limit: Annotated[int, Query(ge=1, le=LIST_LIMIT)] = 100,
) -> dict[str, Any]:
    ctx = context(request)
    statuses = [s for item in (status or []) for s in item.split(",")]
    bad = [s for s in statuses if s not in STATUSES]
    if bad:
        raise InvalidInput(error_text("api/status_unknown", status=bad[0], statuses=STATUSES), field="status")
    with session_scope(ctx.engine) as db:
        policy = load_policy(db)
        if order == "precedence":
            flt = QueueFilter(scheduling_class=scheduling_class, genesis=genesis, limit=limit)
            if statuses:
                flt = QueueFilter(statuses=statuses, scheduling_class=scheduling_class, genesis=genesis, limit=limit)
            rows = [row for row, _cls in ranked_queue(db, policy, flt)]
        else:
            stmt = select(Session)
            if statuses:
                stmt = stmt.where(col(Session.status).in_(statuses))
            if scheduling_class:
                stmt = stmt.where(class_expr(policy) == scheduling_class)
            if genesis:
                stmt = stmt.where(Session.genesis == genesis)
            rows = list(db.exec(stmt.order_by(col(Session.created_at).desc(), col(Session.id).desc()).limit(limit)))
        spent = spends_by(db, [row.id or 0 for row in rows])
        sessions = [session_view(row, policy, spent[row.id or 0]) for row in rows]
    return {"order": order, "count": len(sessions), "sessions": sessions}


@router.get("/sessions/{session_id}", response_model=SessionDetail, responses=refusals(404, 422, 503),
            summary="A session, with why it is waiting")
def read(session_id: SessionId, request: Request) -> dict[str, Any]:
    ctx = context(request)
    with session_scope(ctx.engine) as db:
        session = get_session(db, session_id)
        policy, now = load_policy(db), ctx.clock.now()
        out = session_detail(db, session, policy, now)
        if session.status == Status.WAITING.value and not session.bookkeeping:
            out["ladder"] = ladder_out(ladder_view.selected(db, ladder_view.read(db, policy, now), session_id))
        return out


@router.patch("/sessions/{session_id}", response_model=SessionChanged, responses=refusals(404, 409, 422, 503),
              summary="Change a session's class, rank, weight, own capacity budget or cost cap")
def patch(session_id: SessionId, body: SessionPatch, request: Request, who: CallerDep) -> dict[str, Any]:
    ctx = context(request)
    fields = body.model_dump(exclude_unset=True)
    place = resolve_placement(precedence=fields.get("precedence"), place=fields.get("place"))
    now = ctx.clock.now()
    changed: dict[str, list[Any]] = {}
    promoted = False
    with session_scope(ctx.engine) as db:
        session = get_session(db, session_id)
        who.require_owner(f"changing session #{session_id}", session.requester)
        # A done session may still be replied to, so its cost cap may change, as `/pacer cap` allows.
        cap_only = session.status == Status.DONE.value and fields.keys() == {"cost_cap_usd"}
        if session.status in FINISHED and not cap_only:
            raise Refused(error_text("api/cannot_rank", session_id=session_id, status=session.status))
        claim = _claim_change(fields)
        if claim is not None:  # checked before anything moves: a bad claim changes nothing
            own = (None, None) if claim.fleet_budget else (claim.capacity, claim.multiplier)
            if not (claim.fleet_budget or claim.capacity is not None or claim.multiplier is not None):
                own = (session.capacity, session.capacity_multiplier)
            check_claim(session.weight if claim.weight is None else claim.weight, *own)
        before_rank = session.precedence
        if "scheduling_class" in fields:
            parse_class(fields["scheduling_class"])
            before, after = change_class(db, session, fields["scheduling_class"], now=now, place=fields.get("place"))
            if before is not after:
                changed["scheduling_class"] = [before.value, after.value]
            promoted = (
                before is SchedulingClass.SPOT
                and after is SchedulingClass.PRIORITY
                and session.status == Status.WAITING.value
            )
        elif place == TOP_OF_SPOT:
            set_precedence(db, session, TOP_OF_SPOT, now=now)
        if isinstance(place, int):
            set_precedence(db, session, place, now=now)
        if session.precedence != before_rank:
            changed["precedence"] = [before_rank, session.precedence]
    if claim is not None:
        changed.update(change_claim(ctx, session_id, claim, actor=who.name))
    if "cost_cap_usd" in fields:
        changed.update(set_cap(ctx, session_id, fields["cost_cap_usd"], actor=who.name))
    started = None
    if promoted:
        # Promotion removes the gate; StartNow is what stops it waiting out a re-check (#423).
        try:
            started = start_now_out(start_now(ctx, session_id, actor=who.name), ctx.clock.now())
        except PacerError as exc:
            started = {"shape": "refused", "sentence": str(exc), "submission": None}
    if {"scheduling_class", "precedence"} & changed.keys():  # a PATCH that moved nothing tells no one
        ctx.emit("queue_reordered", session_id=session_id, actor=who.name)  # as `/pacer promote|demote|rank` does
    return {"session": _detail(ctx, session_id), "changed": changed, "start_now": started}


def _claim_change(fields: dict[str, Any]) -> ClaimChange | None:
    """The claim part of a PATCH: null capacity or multiplier means the fleet's budget again."""
    if not {"weight", "capacity", "capacity_multiplier"} & fields.keys():
        return None
    cleared = any(key in fields and fields[key] is None for key in ("capacity", "capacity_multiplier"))
    return ClaimChange(
        weight=fields.get("weight"),
        capacity=fields.get("capacity"),
        multiplier=fields.get("capacity_multiplier"),
        fleet_budget=cleared and fields.get("capacity") is None and fields.get("capacity_multiplier") is None,
    )


def _require_owner(ctx: Any, who: Caller, session_id: int, doing: str) -> None:
    """Refuse `doing` unless the caller may act on the session (its requester, or an operator)."""
    with session_scope(ctx.engine) as db:
        who.require_owner(doing, get_session(db, session_id).requester)


@router.post("/sessions/{session_id}/start_now", response_model=StartNowOut, responses=refusals(404, 409, 422, 503),
             summary="Start a queued session now")
def start(session_id: SessionId, request: Request, who: CallerDep) -> dict[str, Any]:
    ctx = context(request)
    _require_owner(ctx, who, session_id, f"starting session #{session_id}")
    return start_now_out(start_now(ctx, session_id, actor=who.name), ctx.clock.now())


@router.post("/sessions/{session_id}/restart", response_model=RestartOut, responses=refusals(404, 409, 422, 503),
             summary="Restart a session from scratch: its first prompt, a new agent session, through the gate")
def restart(session_id: SessionId, request: Request, who: CallerDep) -> dict[str, Any]:
    ctx = context(request)
    _require_owner(ctx, who, session_id, f"restarting session #{session_id}")
    result = restart_from_scratch(ctx, session_id, actor=who.name)
    return {
        "sentence": result.sentence,
        "kept": result.kept,
        "submission": submission_out(result.submission, ctx.clock.now()),
    }


@router.post("/sessions/{session_id}/summary", response_model=SummaryOut, responses=refusals(404, 422, 503),
             summary="Ask for a status summary: Pacer's own bookkeeping, refused rather than queued")
def summary(session_id: SessionId, request: Request, who: CallerDep) -> dict[str, Any]:
    result = summarize(context(request), session_id, actor=who.name, surface="api")
    return {"outcome": result.outcome, "source_id": result.source_id, "session_id": result.session_id,
            "sentence": result.sentence, "digest": result.digest}


@router.post("/sessions/{session_id}/archive", response_model=Archived, responses=refusals(404, 409, 422, 503),
             summary="Archive a session")
def archive_session(session_id: SessionId, request: Request, who: CallerDep) -> dict[str, Any]:
    ctx = context(request)
    _require_owner(ctx, who, session_id, f"archiving session #{session_id}")
    previous = archive(ctx, session_id, actor=who.name)
    return {"session": _detail(ctx, session_id), "previous_status": previous}


@router.post("/sessions/{session_id}/stop", response_model=StoppedOut, responses=refusals(404, 409, 422, 503),
             summary="Stop a session: halt its running turn and archive it")
def stop_session(session_id: SessionId, request: Request, who: CallerDep) -> dict[str, Any]:
    ctx = context(request)
    _require_owner(ctx, who, session_id, f"stopping session #{session_id}")
    stopped = stop(ctx, session_id, actor=who.name, why="stop")
    return {"session": _detail(ctx, session_id), "previous_status": stopped.previous, "halted": stopped.halted}


@router.post("/sessions/{session_id}/messages", response_model=MessagePosted, responses=refusals(404, 409, 422, 503),
             summary="Post a follow-up message")
def post_message(session_id: SessionId, body: MessageCreate, request: Request, who: CallerDep) -> dict[str, Any]:
    ctx = context(request)
    _check_prompt(request, body.text, "text")
    with session_scope(ctx.engine) as db:
        session = get_session(db, session_id)
        if session.status == Status.ARCHIVED.value:
            raise Refused(error_text("turns/archived", session_id=session_id))
    if who.actor is not None:
        # A rostered human speaking to a session: recorded, delivered as its next turn, and the
        # re-rank (top of the spot queue, StartNow) runs off this request.
        message = record_human_message(ctx, session_id, who.actor, body.text, "api", roster=True)
        return {
            "session": _detail(ctx, session_id),
            "human_message": True,
            "message_id": message.id,
            "delivery": message.delivery,
            "submission": None,
        }
    sub = submit_turn(ctx, session_id, body.text, kind="follow_up")
    return {"session": _detail(ctx, session_id), "human_message": False, "message_id": None,
            "submission": submission_out(sub, ctx.clock.now())}
