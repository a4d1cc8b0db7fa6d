"""The production Notifier: every notice is logged, and handed to each configured surface
(Slack threads, GitHub sticky comments). A surface that fails is logged and skipped."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session as DBSession

from integrations.turn_progress import PROGRESS
from scheduler.front import Session, class_of, load_policy
from scheduler.ports import Notifier

log = logging.getLogger("pacer.notices")


class LogNotifier:
    """One line per notice, so a newcomer sees sessions arrive, queue, hold and run in the log.

    Each line carries what a log shipper filters on as fields of its record (JSON shows them, see
    bot.observe.logs): `event`, the notice's `reason` when it has one (a queue hold's, too) and, given
    `describe`, the session's `genesis` and resolved `class`."""

    def __init__(self, describe: Callable[[int], Mapping[str, str]] | None = None) -> None:
        self.describe = describe

    def notify(self, event: str, context: Mapping[str, Any]) -> None:
        sid = context.get("session_id")
        if event == PROGRESS:  # every few seconds of a running turn: not news for the log
            log.debug("session #%s progress (turn %s)", sid, context.get("turn_id"))
            return
        detail = context.get("sentence") or context.get("error") or context.get("title") or ""
        suffix = f": {detail}" if detail else ""
        fields: dict[str, Any] = {"event": event}
        reason = context.get("reason") or getattr(context.get("hold"), "reason", None)
        if reason:
            fields["reason"] = str(reason)
        if sid is None:  # a notice about the queue or an operator hold, not one session
            log.info("%s%s", event, suffix, extra=fields)
        else:
            fields |= {"session_id": sid, **(self.describe(int(sid)) if self.describe else {})}
            log.info("session #%s %s%s", sid, event, suffix, extra=fields)


def session_fields(engine: Engine) -> Callable[[int], dict[str, str]]:
    """A session's `genesis` and resolved `class`, read for its notice's log line; nothing when the
    row is gone or the database does not answer (the line is logged all the same)."""

    def describe(session_id: int) -> dict[str, str]:
        try:
            with DBSession(engine) as db:
                row = db.get(Session, session_id)
                return {} if row is None else {"genesis": row.genesis, "class": class_of(row, load_policy(db)).value}
        except SQLAlchemyError:
            return {}

    return describe


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
