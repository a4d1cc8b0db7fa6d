"""The REST API under /api/v1: sessions, triggers, policy and holds, with its OpenAPI document
(FastAPI's, at /openapi.json and /docs). Every route is behind the bearer token
(`PACER_API_TOKEN`) and answers errors as JSON that names what is wrong (see `guard`)."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Security
from fastapi.security import HTTPBearer

from bot.api import chat, policy, sessions, triggers

PREFIX = "/api/v1"

# Documents the bearer scheme in the OpenAPI document; the check itself runs in GuardedRoute,
# before the body is parsed.
bearer = HTTPBearer(auto_error=False, description="PACER_API_TOKEN")


def router() -> APIRouter:
    api = APIRouter(prefix=PREFIX, dependencies=[Security(bearer)])
    api.include_router(sessions.router)
    api.include_router(triggers.router)
    api.include_router(policy.router)
    api.include_router(chat.router)
    return api


def register(app: FastAPI) -> None:
    app.include_router(router())


__all__ = ["PREFIX", "register", "router"]
