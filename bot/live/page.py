"""The live page: GET / (the page), GET /live/state (its sections and chart data, polled every
two seconds by `static/live.js`) and GET /static/<file> (the vendored uPlot and the page's own
script and style). Read-only: no forms, no other methods.

Who may look: whoever holds an API token, the shared `PACER_API_TOKEN` or a personal one from
`PACER_API_TOKENS`. `/?token=<token>` once sets an HttpOnly, SameSite=Strict cookie and redirects
to `/`, so the token leaves the address bar and the history. The cookie is `<expiry>.<HMAC>`:
the instant it stops working (PACER_LIVE_COOKIE_HOURS on, also its Max-Age) signed with a key
made from the token (its SHA-256, all Pacer keeps of a personal one), never the token itself. The
server refuses it past that instant, or once the token is changed or removed, whatever the
browser still sends. `Authorization: Bearer <token>` works too. Anyone else gets a 401 page saying
how to get in. Nothing is fetched from another origin, and the Content-Security-Policy says so.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)

from bot.api.callers import bearer, identify, shared_token
from bot.config.rules import token_digest
from bot.live import view as live_view
from scheduler.front import PROJECTION_MINUTES
from templates import error_text, render_html

COOKIE = "pacer_live"
STATIC = Path(__file__).resolve().parent.parent / "static"  # bot/static/
TYPES = {".js": "text/javascript", ".css": "text/css", ".LICENSE": "text/plain"}
POLL_MS = 2000
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; form-action 'none'; base-uri 'none'",
    "Referrer-Policy": "no-referrer",  # the first visit's address carries the token
    "Cache-Control": "no-store",
}

router = APIRouter(include_in_schema=False)


def cookie_value(key: str, expires: int) -> str:
    """The cookie for a token whose key (its SHA-256) is `key`, good until `expires` (Unix seconds)."""
    mac = hmac.new(key.encode(), f"pacer live page|{expires}".encode(), hashlib.sha256).hexdigest()
    return f"{expires}.{mac}"


def cookie_keys(pacer: Any) -> list[str]:
    """Every key a cookie may be signed with: one per token that opens the page."""
    shared = shared_token(pacer)
    return [*([token_digest(shared)] if shared else []), *pacer.settings.personal_tokens.values()]


def now_seconds(request: Request) -> int:
    return int(request.app.state.pacer.clock.now().timestamp())


def is_signed_in(request: Request) -> bool:
    pacer = request.app.state.pacer
    given = bearer(request.headers)
    if given is not None:
        return identify(pacer, given) is not None
    expires, _, _mac = request.cookies.get(COOKIE, "").partition(".")
    if not expires.isdigit() or int(expires) <= now_seconds(request):
        return False
    cookie = request.cookies[COOKIE].encode()
    matched = False
    for key in cookie_keys(pacer):  # every key is tried, so the time taken says nothing of which matched
        matched |= hmac.compare_digest(cookie, cookie_value(key, int(expires)).encode())
    return matched


def locked(request: Request, configured: bool, *, wrong: bool) -> HTMLResponse:
    hours = request.app.state.pacer.settings.live_cookie_hours
    body = render_html("page/locked.html.j2", configured=configured, wrong=wrong, hours=hours)
    return HTMLResponse(body, status_code=401, headers={**HEADERS, "WWW-Authenticate": "Bearer"})


@router.get("/", response_class=HTMLResponse)
def page(request: Request) -> Response:
    pacer = request.app.state.pacer
    configured = bool(cookie_keys(pacer))
    given = request.query_params.get("token")
    if given is not None:
        if identify(pacer, given) is None:
            return locked(request, configured, wrong=True)
        lasts = int(pacer.settings.live_cookie_hours) * 3600
        answer = RedirectResponse("/", status_code=303, headers=HEADERS)
        answer.set_cookie(
            COOKIE,
            cookie_value(token_digest(given), now_seconds(request) + lasts),
            max_age=lasts,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return answer
    if not is_signed_in(request):
        return locked(request, configured, wrong=False)
    waiter = selected_waiter(request, json=False)
    if isinstance(waiter, Response):
        return waiter
    view = live_view.read(request.app.state.pacer, waiter)
    return HTMLResponse(
        render_html(
            "page/live.html.j2", **sections(view), charts=view.charts(), poll_ms=POLL_MS, now=view.now
        ), headers=HEADERS
    )


@router.get("/live/state")
def state(request: Request) -> Response:
    if not is_signed_in(request):
        return JSONResponse({"error": "unauthorized"}, status_code=401, headers=HEADERS)
    waiter = selected_waiter(request, json=True)
    if isinstance(waiter, Response):
        return waiter
    view = live_view.read(request.app.state.pacer, waiter)
    return JSONResponse(
        {"sections": sections(view), "charts": view.charts(), "now": view.now.isoformat()}, headers=HEADERS
    )


def selected_waiter(request: Request, *, json: bool) -> int | None | Response:
    """`?waiter=<id>`: the waiter whose bounded queue ladder the queue section shows; anything
    but a session id is answered 422, saying so."""
    raw = request.query_params.get("waiter")
    if raw is None or raw == "":
        return None
    if raw.isascii() and raw.isdigit() and len(raw) <= 18 and int(raw) > 0:
        return int(raw)
    problem = error_text("live/waiter_not_an_id", raw=raw[:40])
    if json:
        return JSONResponse({"error": problem}, status_code=422, headers=HEADERS)
    return PlainTextResponse(problem, status_code=422, headers=HEADERS)


def sections(view: live_view.LiveView) -> dict[str, Any]:
    """Each part of the page as HTML: the page includes them, and the poll swaps them in place."""
    return {
        "card": render_html("page/card.html.j2", card=view.card, d=view.card.decision, text=view.card_text),
        "notices": render_html("page/notices.html.j2", notices=view.notices),
        "queue": render_html(
            "page/queue.html.j2", view=view.queue, facts=view.facts, now=view.now, selected=view.selected,
            progress=view.progress,
        ),
        "finished": render_html(
            "page/finished.html.j2", rows=view.finished, now=view.now, limit=live_view.FINISHED_ROWS
        ),
        "holds": render_html("page/holds.html.j2", **view.holds.values()),
        "timeline": render_html("page/timeline.html.j2", timeline=view.timeline),
        "burn": render_html("page/burn.html.j2", rates=view.burn, minutes=PROJECTION_MINUTES),
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
