"""The error answers of /api/v1, as the OpenAPI document states them.

Every error is one JSON object (`guard.error_body` writes it): `error`, a code fixed by the status;
`message`, what is wrong and the fix; `field`, the request field at fault when there is one; and
for a request that does not fit its schema, `errors`, every field at fault. The document gives
each status its own body, so a client can tell a refusal from its shape alone:

    400 disconnected    the client went away before its body arrived
    401 unauthorized    no token configured, none sent, or the wrong one (with WWW-Authenticate)
    403 forbidden       X-Pacer-Actor names someone the token does not speak for, or the
                        caller's role does not allow it
    404 not_found       the session or trigger in the path, or a session the body names, does
                        not exist (with `field` when the body named it)
    409 conflict        the request is well formed but the state refuses it: a time the clock
                        has passed, a trigger's kind, an archived session (with `field` when one
                        field is at fault)
    408 timeout         the body stalled or came too slowly (PACER_BODY_TIMEOUT_SECONDS,
                        PACER_BODY_MIN_RATE); the connection is closed
    413 too_large       the body passes PACER_MAX_BODY_BYTES
    422 invalid_input   a value breaks a rule the document states (a trigger's template must also
                        compile and render, which the document says in words)
    503 unavailable     the database cannot be reached (with Retry-After), or the scheduler is
                        not running in this process
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

# Every route's guard answers these: the body is read (400, 408, 413) and the caller checked
# (401, 403) before the route runs, and any route may find the database down (503).
EVERY_ROUTE = (400, 401, 403, 408, 413, 503)


class ErrorBody(BaseModel):
    message: str = Field(description="What is wrong and, where there is one, the fix")
    field: str | SkipJsonSchema[None] = Field(None, description="The request field at fault, when one is")


class DisconnectedBody(ErrorBody):
    error: Literal["disconnected"]


class UnauthorizedBody(ErrorBody):
    error: Literal["unauthorized"]


class ForbiddenBody(ErrorBody):
    error: Literal["forbidden"]


class NotFoundBody(ErrorBody):
    error: Literal["not_found"]


class ConflictBody(ErrorBody):
    error: Literal["conflict"]


class TimeoutBody(ErrorBody):
    error: Literal["timeout"]


class TooLargeBody(ErrorBody):
    error: Literal["too_large"]


class FieldProblem(BaseModel):
    field: str = Field(description="Where: a field, a path or query parameter, or `body` for the whole body")
    message: str
    allowed: str | SkipJsonSchema[None] = Field(None, description="The values allowed, when the rule is a list")


class InvalidInputBody(ErrorBody):
    error: Literal["invalid_input"]
    errors: list[FieldProblem] | SkipJsonSchema[None] = Field(
        None, description="Every field at fault, when the request does not fit its schema"
    )


class UnavailableBody(ErrorBody):
    error: Literal["unavailable"]


_BODIES: dict[int, tuple[type[ErrorBody], str]] = {
    400: (DisconnectedBody, "The client went away before its body arrived"),
    401: (UnauthorizedBody, "No API token is configured, none was sent, or it is not the right one"),
    403: (ForbiddenBody, "X-Pacer-Actor names someone other than the token's holder (the shared token names no one), "
                         "or the caller's role does not allow this"),
    404: (NotFoundBody, "The session or trigger named in the path, or a session the body names (parent_session_id, "
                        "forked_from), does not exist"),
    409: (ConflictBody, "Well formed, but the state refuses it (archived, finished, asleep, a name taken, disabled, "
                        "a time the clock has passed, a trigger's kind)"),
    408: (TimeoutBody, "The body stalled for PACER_BODY_TIMEOUT_SECONDS or came slower than PACER_BODY_MIN_RATE; "
                       "the connection is closed"),
    413: (TooLargeBody, "The body passes PACER_MAX_BODY_BYTES"),
    422: (InvalidInputBody, "A value breaks a rule of this document (a trigger's prompt_template must also compile "
                           "and render, as its description says)"),
    503: (UnavailableBody, "The database cannot be reached (try again after Retry-After seconds), or the scheduler "
                           "is not running in this process"),
}


def refusals(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses` of a route: its own error statuses and the ones every route gives."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in sorted({*EVERY_ROUTE, *statuses}):
        model, description = _BODIES[status]
        entry: dict[str, Any] = {"model": model, "description": description}
        if status == 401:
            entry["headers"] = {"WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}}
        if status == 503:
            entry["headers"] = {
                "Retry-After": {
                    "description": "Seconds to wait before trying again (when the database is down)",
                    "schema": {"type": "integer"},
                }
            }
        out[status] = entry
    return out


__all__ = ["EVERY_ROUTE", "ErrorBody", "FieldProblem", "InvalidInputBody", "refusals"]
