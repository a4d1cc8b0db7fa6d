"""The REST API under /api/v1: sessions, triggers, policy and holds, with its OpenAPI document
(FastAPI's, at /openapi.json and /docs). Every route is behind a bearer token — a person's own
(`PACER_API_TOKENS`) or the shared one for automation (`PACER_API_TOKEN`), see `callers` — and
answers errors as JSON that names what is wrong (see `guard`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Security
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer

from bot.api import chat, holding, policy, sessions, trigger_configs, triggers
from bot.api.callers import ACTOR_HEADER
from bot.api.guard import error_body
from templates import error_text

PREFIX = "/api/v1"

# Documents the bearer scheme in the OpenAPI document; the check itself runs in GuardedRoute,
# before the body is parsed.
bearer = HTTPBearer(
    auto_error=False,
    description="A person's own token from PACER_API_TOKENS (the call acts as them, with their role), or the shared "
    "PACER_API_TOKEN for automation (audited as 'api token', with the role PACER_API_ROLE: member unless set)",
)


# GuardedRoute reads X-Pacer-Actor before the body is parsed, so it is no route's parameter;
# the document states it on every operation.
ACTOR = {
    "name": ACTOR_HEADER,
    "in": "header",
    "required": False,
    "schema": {"type": "string"},
    "description": "Optional: the person the call speaks for, who must be the holder of the personal token sent "
    "(403 for anyone else). The shared token speaks only as 'api token': with it, leave this out (403 otherwise)",
}


MODULES = (sessions, triggers, policy, chat, holding)
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE")


@cache
def router() -> APIRouter:
    """Built once a process: an app includes a copy of its routes, and FastAPI prepares each route
    (its parameters' and body's validators) the first time a router is included, a tenth of a
    second of CPU that every app after the first (the tests make one per test) then skips."""
    api = APIRouter(prefix=PREFIX, dependencies=[Security(bearer)])
    for module in MODULES:
        api.include_router(module.router)
    refuse_other_methods(api)
    return api


def refuse_other_methods(api: APIRouter) -> None:
    """A method a path does not take is a 405 with the methods it does take in `Allow` (every
    one: FastAPI keeps one route per method, and the first it tries would name only its own)."""
    allowed: dict[str, set[str]] = {}
    for module in MODULES:
        for route in module.router.routes:
            if isinstance(route, APIRoute):
                allowed.setdefault(route.path, set()).update(route.methods or ())
    for path, methods in allowed.items():
        api.add_api_route(path, method_refusal(sorted(methods)), methods=[m for m in METHODS if m not in methods],
                          include_in_schema=False)


def method_refusal(methods: list[str]) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def refuse(request: Request) -> JSONResponse:
        message = error_text("api/method_not_allowed", method=request.method, path=request.url.path, allowed=methods)
        answer = error_body(405, "method_not_allowed", message)
        answer.headers["Allow"] = ", ".join(methods)
        return answer

    return refuse


def register(app: FastAPI) -> None:
    app.include_router(router())
    app.openapi = document(app)  # type: ignore[method-assign]


def document(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """FastAPI's OpenAPI document with X-Pacer-Actor on every operation and this deployment's
    own limits: the longest prompt (PACER_MAX_PROMPT_CHARS) and the runtimes configured here,
    so a request the document calls valid is one this server takes."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        found = build()
        for path, operations in found.get("paths", {}).items():
            if path.startswith(PREFIX):
                for operation in operations.values():
                    operation.setdefault("parameters", []).append(dict(ACTOR))
        pacer = app.state.pacer
        schemas = found.get("components", {}).get("schemas", {})
        for model, field in (("SessionCreate", "prompt"), ("MessageCreate", "text")):
            if field in schemas.get(model, {}).get("properties", {}):
                schemas[model]["properties"][field]["maxLength"] = int(pacer.settings.max_prompt_chars)
        ctx = getattr(pacer, "ctx", None) or pacer.extras.get("scheduler_context")
        if ctx is not None:
            runtimes(schemas, sorted(ctx.limits.runtimes))
        trigger_configs.describe(schemas)
        return found

    return openapi


def runtimes(schemas: dict[str, Any], names: list[str]) -> None:
    """Where a request names a runtime, the document lists this deployment's."""
    properties = {model: schemas.get(model, {}).get("properties", {}) for model in schemas}
    if "runtime" in properties.get("SessionCreate", {}):
        properties["SessionCreate"]["runtime"]["anyOf"] = [{"enum": names, "type": "string"}, {"type": "null"}]
    if "runtime" in properties.get("SpendReset", {}):
        properties["SpendReset"]["runtime"] = {**properties["SpendReset"]["runtime"], "enum": names}
    budgets = properties.get("PolicyPatch", {}).get("cost_budgets", {}).get("anyOf", [])
    for option in budgets:
        if option.get("type") == "object":
            option["propertyNames"] = {"enum": names}


__all__ = ["PREFIX", "register", "router"]
