"""What stands in front of every /api/v1 route: the bearer token and who it speaks for
(`bot.api.callers`), the body size limit, and the one place a raised error becomes a JSON answer.

    ApiError(401 unauthorized)     no token configured, none given, or the wrong one
    Forbidden        -> 403        X-Pacer-Actor names someone the token does not speak for, or
                                   the caller's role does not allow it
    NotFound         -> 404
    InvalidInput     -> 422        with `field`; request-shape errors list every field at fault
    Refused          -> 409        the request is valid but the state refuses it
    ApiError(413 too_large)        the body is over PACER_MAX_BODY_BYTES, by its Content-Length or,
                                   chunked, by the bytes read (reading stops there)
    ApiError(400 disconnected)     the client left before its body arrived
    ApiError(503 unavailable)      the scheduler is not running in this process
    a database error -> 503        unavailable, with Retry-After: the database cannot be reached

`bot.api.refusals` states each of these bodies in the OpenAPI document.

The route class runs the token check before the body is parsed, so a caller without the token
learns nothing about the API's shapes, and its errors never reach the other surfaces' routes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Annotated, Any

from fastapi import Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import Message

from bot.api.callers import Caller, Unauthorized, identify_caller
from bot.observe.logs import first_line
from bot.runtime.http_body import read_bounded
from scheduler.errors import Forbidden, InvalidInput, NotFound, Refused
from templates import error_text

log = logging.getLogger("pacer.api")

# What a database that is down, restarting or out of connections raises: the driver's connection
# errors (OperationalError, InterfaceError) and the pool's wait for a free connection running out.
DATABASE_DOWN = (OperationalError, InterfaceError, PoolTimeout)
RETRY_AFTER_SECONDS = 5


class ApiError(Exception):
    def __init__(self, status: int, error: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.field = field


def error_body(
    status: int, error: str, message: str, *, field: str | None = None, errors: list[dict[str, Any]] | None = None
) -> JSONResponse:
    body: dict[str, Any] = {"error": error, "message": message}
    if field is not None:
        body["field"] = field
    if errors is not None:
        body["errors"] = errors
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def authenticate(request: Request) -> Caller:
    try:
        return identify_caller(request.app.state.pacer, request.headers)
    except Unauthorized as exc:
        raise ApiError(401, "unauthorized", str(exc)) from None


def caller(request: Request) -> Caller:
    """The dependency an endpoint takes its caller from (set by the route class)."""
    found = getattr(request.state, "caller", None)
    if not isinstance(found, Caller):  # every /api/v1 route is a GuardedRoute, which sets it
        raise ApiError(401, "unauthorized", error_text("api/token_missing"))
    return found


CallerDep = Annotated[Caller, Depends(caller)]


def _location(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


def _problem(item: Mapping[str, Any]) -> dict[str, Any]:
    """One pydantic error as {field, message, allowed?}; pydantic's own wording, except where
    it names its internals rather than the request."""
    loc = tuple(item.get("loc", ()))
    kind = item.get("type")
    ctx = item.get("ctx") or {}
    if kind == "json_invalid":  # loc is ("body", <character position>)
        return {"field": "body", "message": error_text("api/not_json", problem=str(ctx.get("error", "")))}
    if kind == "model_attributes_type" and loc == ("body",):
        return {"field": "body", "message": error_text("api/not_an_object")}
    entry: dict[str, Any] = {"field": _location(loc), "message": item.get("msg", "invalid")}
    if kind == "extra_forbidden":
        entry["message"] = error_text("api/not_a_field")
    if ctx.get("expected"):
        entry["allowed"] = str(ctx["expected"])
    return entry


def validation_body(exc: RequestValidationError) -> JSONResponse:
    errors = [_problem(item) for item in exc.errors()] or [
        {"field": "body", "message": error_text("api/not_an_object")}
    ]
    first = errors[0]
    message = error_text(
        "api/field_problem", field=first["field"], message=first["message"], allowed=first.get("allowed")
    )
    return error_body(422, "invalid_input", message, field=first["field"], errors=errors)


class GuardedRoute(APIRoute):
    """Every /api/v1 route: authenticate first, then run, then map what it raised."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                limit = int(request.app.state.pacer.settings.max_body_bytes)
                length = request.headers.get("content-length")
                if length is not None and length.isdigit() and int(length) > limit:
                    raise ApiError(413, "too_large", error_text("api/body_too_large", length=length, limit=limit))
                request.state.caller = authenticate(request)
                return await handler(await bounded(request, limit))
            except ApiError as exc:
                return error_body(exc.status, exc.error, str(exc), field=exc.field)
            except RequestValidationError as exc:
                return validation_body(exc)
            except InvalidInput as exc:
                return error_body(422, "invalid_input", str(exc), field=exc.field)
            except NotFound as exc:
                return error_body(404, "not_found", str(exc))
            except Forbidden as exc:
                return error_body(403, "forbidden", str(exc))
            except Refused as exc:
                return error_body(409, "conflict", str(exc))
            except DATABASE_DOWN as exc:
                # One line, not the driver's traceback: the outage is the operator's to see, the
                # caller's to wait out.
                log.warning(
                    "%s %s: the database cannot be reached (%s)", request.method, request.url.path, first_line(exc)
                )
                answer = error_body(
                    503, "unavailable", error_text("api/database_unavailable", seconds=RETRY_AFTER_SECONDS)
                )
                answer.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
                return answer
            except HTTPException as exc:
                if exc.status_code != 400:
                    raise
                # FastAPI's answer to a body json cannot read at all (nested past Python's
                # recursion limit): unparsable, as a body that is not JSON is.
                return error_body(422, "invalid_input", error_text("api/nested_too_deep"), field="body")

        return guarded


async def bounded(request: Request, limit: int) -> Request:
    """`request` with its body read now, up to `limit` bytes whatever the framing: a chunked
    body sends no Content-Length, so only counting the bytes as they come holds the limit."""
    try:
        body = await read_bounded(request, limit)
    except ClientDisconnect:
        raise ApiError(400, "disconnected", error_text("api/disconnected")) from None
    if body is None:
        raise ApiError(413, "too_large", error_text("api/body_past_limit", limit=limit))
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if delivered:
            return await request.receive()  # after the body: wait for the disconnect, as Starlette does
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(request.scope, replay)
