"""The live page: GET / (the page), GET /live/state (its sections and chart data, polled every
two seconds by `static/live.js`) and GET /static/<file> (the vendored uPlot and the page's own
script and style). Read-only: no forms, no other methods.

Who may look: whoever holds the API token (`PACER_API_TOKEN`). `/?token=<token>` once sets an
HttpOnly, SameSite=Strict cookie and redirects to `/`, so the token leaves the address bar and
the history; the cookie holds an HMAC of the token, never the token, and stops working when the
token changes. `Authorization: Bearer <token>` works too. Anyone else gets a 401 page saying how
to get in. Nothing is fetched from another origin, and the Content-Security-Policy says so.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response

from bot import live_view
from bot.api.guard import configured_token
from templates import render_html

COOKIE = "pacer_live"
STATIC = Path(__file__).resolve().parent / "static"
TYPES = {".js": "text/javascript", ".css": "text/css", ".LICENSE": "text/plain"}
POLL_MS = 2000
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; form-action 'none'; base-uri 'none'",
    "Referrer-Policy": "no-referrer",  # the first visit's address carries the token
    "Cache-Control": "no-store",
}

router = APIRouter(include_in_schema=False)


def cookie_value(token: str) -> str:
    return hmac.new(token.encode(), b"pacer live page", hashlib.sha256).hexdigest()


def is_signed_in(request: Request, token: str | None) -> bool:
    if not token:
        return False
    cookie = request.cookies.get(COOKIE, "")
    if cookie and hmac.compare_digest(cookie.encode(), cookie_value(token).encode()):
        return True
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def locked(token: str | None, *, wrong: bool) -> HTMLResponse:
    body = render_html("page/locked.html.j2", configured=bool(token), wrong=wrong)
    return HTMLResponse(body, status_code=401, headers={**HEADERS, "WWW-Authenticate": "Bearer"})


@router.get("/", response_class=HTMLResponse)
def page(request: Request) -> Response:
    token = configured_token(request)
    given = request.query_params.get("token")
    if given is not None:
        if not token or not hmac.compare_digest(given.encode(), token.encode()):
            return locked(token, wrong=True)
        answer = RedirectResponse("/", status_code=303, headers=HEADERS)
        answer.set_cookie(COOKIE, cookie_value(token), httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/")
        return answer
    if not is_signed_in(request, token):
        return locked(token, wrong=False)
    view = live_view.read(request.app.state.pacer)
    return HTMLResponse(render_html("page/live.html.j2", **sections(view), charts=view.charts(), poll_ms=POLL_MS), headers=HEADERS)


@router.get("/live/state")
def state(request: Request) -> Response:
    if not is_signed_in(request, configured_token(request)):
        return JSONResponse({"error": "unauthorized"}, status_code=401, headers=HEADERS)
    view = live_view.read(request.app.state.pacer)
    return JSONResponse({"sections": sections(view), "charts": view.charts(), "now": view.now.isoformat()}, headers=HEADERS)


def sections(view: live_view.LiveView) -> dict[str, Any]:
    """Each part of the page as HTML: the page includes them, and the poll swaps them in place."""
    return {
        "card": render_html("page/card.html.j2", card=view.card, d=view.card.decision, text=view.card_text),
        "queue": render_html("page/queue.html.j2", view=view.queue),
        "holds": render_html("page/holds.html.j2", **view.holds.values()),
        "timeline": render_html("page/timeline.html.j2", timeline=view.timeline),
        "updated": render_html("page/updated.html.j2", now=view.now),
    }


@router.get("/static/{name}")
def static(name: str) -> Response:
    path = STATIC / name
    kind = TYPES.get(path.suffix)
    if kind is None or path.parent != STATIC or not path.is_file():
        return Response(status_code=404)
    return FileResponse(path, media_type=kind, headers={"Cache-Control": "public, max-age=3600"})


def register(app: FastAPI) -> None:
    app.include_router(router)
