"""The production Notifier: every notice is logged, and handed to each configured surface
(Slack threads, GitHub sticky comments). A surface that fails is logged and skipped."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from scheduler.ports import Notifier

log = logging.getLogger("pacer.notices")


class LogNotifier:
    """One line per notice, so a newcomer sees sessions arrive, queue, hold and run in the log."""

    def notify(self, event: str, context: Mapping[str, Any]) -> None:
        sid = context.get("session_id")
        detail = context.get("sentence") or context.get("error") or context.get("title") or ""
        suffix = f": {detail}" if detail else ""
        if sid is None:  # a notice about the queue or an operator hold, not one session
            log.info("%s%s", event, suffix)
        else:
            log.info("session #%s %s%s", sid, event, suffix, extra={"session_id": sid})


class CompositeNotifier:
    def __init__(self, *notifiers: Notifier) -> None:
        self.notifiers = list(notifiers)

    def add(self, notifier: Notifier) -> None:
        self.notifiers.append(notifier)

    def notify(self, event: str, context: Mapping[str, Any]) -> None:
        for notifier in self.notifiers:
            try:
                notifier.notify(event, context)
            except Exception:
                log.exception("%s failed on %s", type(notifier).__name__, event)
