"""APScheduler's one alarm target: a module-level function whose import path never changes,
taking a target name and ids. It finds the live Context through the runtime, so a pickled job
survives a restart and always runs against the current process's adapters."""

from __future__ import annotations

import logging
from typing import Any

from bot import runtime

log = logging.getLogger("pacer.jobs")


def run(name: str, *args: Any) -> Any:
    ctx = runtime.current().ctx
    try:
        return ctx.run_job(name, *args)
    except Exception:
        log.exception("job %s%s failed", name, args)
        raise
