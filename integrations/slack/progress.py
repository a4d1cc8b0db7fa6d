"""A running turn's live progress in its session's Slack thread: one message a turn, posted on the
first news of the turn's progress and edited in place (`chat.update`) after, never reposted.

    messages = ProgressMessages(engine, client, clock, thread_of)   # thread_of: a source's (channel, thread_ts)
    messages.show(session_id)    # post or edit the running turn's message (the notifier spaces these)
    messages.close(session_id)   # the turn has ended: one last edit saying so

The message's ts is kept on the turn's row (`Turn.progress_message`, written once), so whichever
poster comes second, and a process that ends the turn, edit the same message. What it says is
read from the row each time (`turn_reads.running_progress`), like the GitHub status comment: late
or doubled notices still end on what the store holds. The agent's words are escaped for mrkdwn.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from slack_sdk import WebClient
from sqlalchemy import Engine

from integrations.slack.messages import text_blocks
from scheduler.engine.leases import keep_progress_message
from scheduler.ports import Clock
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Turn
from scheduler.store.turn_reads import latest_progress, running_progress
from templates import render
from templates.render import slack_escape

log = logging.getLogger("pacer.slack")


def _escaped(progress: dict[str, Any]) -> dict[str, Any]:
    def esc(value: Any) -> Any:
        return slack_escape(value) if isinstance(value, str) else value

    todos = [{key: esc(value) for key, value in todo.items()} for todo in progress.get("todos") or []
             if isinstance(todo, dict)]
    return {**progress, "tool": esc(progress.get("tool")), "detail": esc(progress.get("detail")), "todos": todos}


def _elapsed(started: datetime | None, finished: datetime | None) -> int | None:
    return max(int((finished - started).total_seconds()), 0) if started and finished else None


class ProgressMessages:
    def __init__(
        self, engine: Engine, client: WebClient, clock: Clock,
        thread_of: Callable[[Mapping[str, Any] | None], tuple[str, str] | None],
    ) -> None:
        self._thread_of = thread_of
        self._engine = engine
        self._client = client
        self._clock = clock
        self._lock = threading.Lock()  # one poster at a time: a turn's first message is posted once
        self._closed: set[int] = set()  # turns whose message already says they ended

    def show(self, session_id: int) -> None:
        """Post or edit the message of the session's running turn, as its row says now."""
        now = self._clock.now()
        with session_scope(self._engine) as db:
            session = db.get(Session, session_id)
            where = self._thread_of(session.source) if session is not None else None
            progress = running_progress(db, [session_id], now).get(session_id) if where is not None else None
            latest = latest_progress(db, session_id) if progress is not None else None
        if where is None or progress is None or latest is None or latest["turn_id"] != progress["turn_id"]:
            return
        text = render("slack/session_progress.j2", p=_escaped(progress), final=False)
        self._put(where, progress["turn_id"], latest["progress_message"], text)

    def close(self, session_id: int) -> None:
        """The session's latest turn has ended: its message says so, once, with its last checklist."""
        with session_scope(self._engine) as db:
            session = db.get(Session, session_id)
            where = self._thread_of(session.source) if session is not None else None
            latest = latest_progress(db, session_id) if where is not None else None
        if where is None or latest is None or latest["status"] == "running" or latest["progress_message"] is None:
            return
        turn_id = latest["turn_id"]
        if turn_id in self._closed:
            return
        shown = {**latest["progress"], "elapsed_s": _elapsed(latest["started_at"], latest["finished_at"])}
        text = render("slack/session_progress.j2", p=_escaped(shown), final=True)
        self._put(where, turn_id, latest["progress_message"], text)
        self._closed.add(turn_id)

    def _put(self, where: tuple[str, str], turn_id: int, ts: str | None, text: str) -> None:
        channel, thread_ts = where
        blocks = text_blocks(text)[:1]  # a checklist of 30 lines of 120 characters fits one section
        with self._lock:
            if ts is None:
                with session_scope(self._engine) as db:
                    turn = db.get(Turn, turn_id)
                    ts = turn.progress_message if turn is not None else None
            if ts is not None:
                self._client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)
                return
            posted = self._client.chat_postMessage(
                channel=channel, thread_ts=thread_ts, text=text, blocks=blocks, unfurl_links=False
            )
            if not keep_progress_message(self._engine, turn_id, str(posted["ts"])):
                log.warning("slack: turn %s already had a progress message; posted %s besides", turn_id, posted["ts"])


__all__ = ["ProgressMessages"]
