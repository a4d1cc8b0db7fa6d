"""APScheduler's one alarm target: `run`, a module-level function whose import path never changes,
taking a target name and ids. APScheduler pickles a reference to it and the ids, never a Context,
so a stored job survives a restart and always runs against the current process's adapters: the
composition root (`bot.runtime.process.build`) installs the process's Context here once."""

from __future__ import annotations

import logging
import threading
from typing import Any

from scheduler.front import Context

log = logging.getLogger("pacer.jobs")

_installed: Context | None = None
_lock = threading.Lock()


def install(ctx: Context | None) -> Context | None:
    """Make `ctx` the Context every alarm in this process runs on; returns the one it replaces."""
    global _installed
    with _lock:
        previous, _installed = _installed, ctx
    return previous


def installed() -> Context:
    if _installed is None:
        raise RuntimeError("Pacer's runtime is not built in this process")
    return _installed


def run(name: str, *args: Any) -> Any:
    ctx = installed()
    try:
        return ctx.run_job(name, *args)
    except Exception:
        log.exception("job %s%s failed", name, args)
        raise
