"""`pacer serve`: build the runtime, the ASGI app, and run uvicorn. SIGTERM stops it cleanly:
uvicorn stops taking requests, `bot.runtime.drain` lets running turns finish or hands them over, the
lifespan stops the scheduler. PACER_HOST=`::` answers on IPv4 and IPv6 both (`bot.serve.bind`)."""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Mapping
from typing import Any

import uvicorn
from sqlalchemy.exc import OperationalError
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from bot.config import checks as settings_checks
from bot.config.settings import Settings, redact_url
from bot.observe import logs
from bot.runtime import process
from bot.runtime.address import reachable_url
from bot.runtime.drain import drain
from bot.serve.app import create_app
from bot.serve.bind import both_stacks, dual_stack_socket
from bot.serve.slow_clients import MAX_HEADER_BYTES, guarded_protocol
from bot.triggers import file as triggers_file
from templates import error_text

log = logging.getLogger("pacer.server")


def serve(settings: Settings, *, host: str | None = None, port: int | None = None, demo: bool = False) -> int:
    settings_checks.check(settings, os.environ)  # settings this machine cannot run stop start-up with one line
    triggers_file.check(settings)  # a bad triggers.toml stops start-up with its one line
    try:
        pacer = process.build(settings, migrate=True)
    except OperationalError as exc:  # one line naming what to do, not the driver's 130-line traceback
        log.error(
            error_text(
                "server/database_unreachable", url=redact_url(settings.database_url), reason=logs.first_line(exc)
            )
        )
        return 1
    bind_host = host or settings.host
    bind_port = port or settings.port
    if demo:
        from bot.serve.demo import install_demo

        install_demo(pacer, base_url=f"http://{bind_host}:{bind_port}")
    pacer.extras.setdefault("on_start", []).append(_freeze_startup_heap)  # after the scheduler starts
    pacer.extras["on_start"].append(lambda p: _advertise(p, reachable_url(bind_host, bind_port)))
    pacer.extras.setdefault("on_stop", []).insert(
        0, lambda p: drain(p, settings.drain_seconds)
    )  # the last hook before the scheduler stops
    app = create_app(pacer)
    log.info(
        "Pacer on http://%s:%s  database=%s  runner=%s  slots=%s (max sessions %s, workers %s)",
        bind_host, bind_port, settings.database_url.split("@")[-1], settings.runner,
        settings.effective_slots, settings.max_sessions, settings.agent_workers,
    )
    options = http_options(settings, os.environ)
    if not both_stacks(bind_host):
        uvicorn.run(app, host=bind_host, port=bind_port, lifespan="on", **options)
        return 0
    try:  # `::`: IPv4 and IPv6 on one socket, which uvicorn's own bind would make IPv6 only
        sock = dual_stack_socket(bind_port)
    except OSError as exc:
        log.error(error_text("server/unbound", host=bind_host, port=bind_port, reason=exc.strerror or exc))
        return 1
    server = uvicorn.Server(uvicorn.Config(app, host=bind_host, port=bind_port, lifespan="on", **options))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # as uvicorn.run
        pass
    finally:
        sock.close()
    return 0 if server.started else 1


def http_options(settings: Settings, environ: Mapping[str, str]) -> dict[str, Any]:
    """uvicorn's options for `pacer serve`: logging, the proxy it trusts, and the client bounds."""
    return {
        "log_level": settings.log_level.lower(),
        "access_log": settings.access_log,
        "log_config": logs.config(settings.log_level, settings.log_format),
        **client_bounds(settings),
        **proxy_options(environ),
    }


def client_bounds(settings: Settings) -> dict[str, Any]:
    """What a client may hold open: uvicorn's own idle and concurrency limits, and its protocol
    with the header deadline it lacks (`bot.serve.slow_clients`; the body deadline is in the app)."""
    return {
        "http": guarded_protocol(AutoHTTPProtocol, settings.header_timeout_seconds),
        "h11_max_incomplete_event_size": 2 * MAX_HEADER_BYTES,  # a backstop: the guard's 431 comes first
        "timeout_keep_alive": settings.keep_alive_seconds,
        "limit_concurrency": settings.max_connections,
    }


def proxy_options(environ: Mapping[str, str]) -> dict[str, object]:
    """On Fly, every request reaches the machine through Fly's edge proxy, which ends TLS and says
    so in X-Forwarded-Proto: trust it there, so a request that came over https is seen as https
    (the live page's cookie is then Secure). Elsewhere uvicorn's default stands: only a proxy on
    loopback is trusted, or the addresses FORWARDED_ALLOW_IPS names."""
    return {"forwarded_allow_ips": "*"} if environ.get("FLY_APP_NAME") else {}


def _freeze_startup_heap(_pacer: object) -> None:
    """Once started, move everything alive into the collector's permanent generation.

    A started server tracks ~150,000 long-lived objects (FastAPI, SQLAlchemy, Jinja2, the
    scheduler). Every full collection walked all of them: 75-130 ms with every thread stopped,
    a few times during a burst of webhooks (bench/webhooks.py), and those pauses were the
    burst's p99. Frozen, a full collection walks only what was made since (~10-20 ms). Nothing
    frozen is ever freed, which suits start-up state.
    """
    gc.collect()
    gc.freeze()


def _advertise(pacer: process.Pacer, url: str) -> None:
    leadership = pacer.extras.get("leadership")
    if leadership is not None:
        leadership.advertise(url)
