"""The ASGI app: health, and the routers each surface adds. The scheduler runs in the lifespan."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from bot.runtime import Pacer
from scheduler import db as dbmod

log = logging.getLogger("pacer.app")


def create_app(pacer: Pacer, *, start_scheduler: bool = True) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if start_scheduler and pacer.scheduler is not None:
            pacer.scheduler.start()
            log.info("scheduler started")
        for hook in pacer.extras.get("on_start", []):
            hook(pacer)
        try:
            yield
        finally:
            for hook in reversed(pacer.extras.get("on_stop", [])):
                hook(pacer)
            if pacer.scheduler is not None and pacer.scheduler.running:
                pacer.scheduler.shutdown(wait=False)
                log.info("scheduler stopped")

    app = FastAPI(title="Pacer", version="0.1.0", lifespan=lifespan)
    app.state.pacer = pacer

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        try:
            ok = dbmod.ping(pacer.engine)
        except Exception as exc:  # the health check reports, it never raises
            return JSONResponse({"ok": False, "database": type(exc).__name__}, status_code=503)
        return JSONResponse({"ok": ok}, status_code=200 if ok else 503)

    for register in pacer.extras.get("routers", []):
        register(app, pacer)
    return app
