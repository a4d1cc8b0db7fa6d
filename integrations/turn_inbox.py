"""A running turn's inbox, in the database: how a person's message reaches an agent mid-turn when
the turn runs in another process (`pacer worker`, another replica) than the one that took it.

    inbox = DbInbox(engine, session_id, turn_id)    # the workers give it to the runner
    inbox.open()          # the agent listens: the turn's row says so (turns.listening)
    inbox.take(8)         # up to 8 of the human messages queued for the session since, each taken once
    inbox.close(take=8)   # it has answered: not listening, and up to 8 of the last ones taken

The sender's side is the engine's (`scheduler.engine.turns`): a human message to a session whose
running turn listens is queued as any message behind a running turn is (`enqueued_messages`) and
answered "to the running agent". The runner polls `take` (TAKE_SECONDS), which marks the
messages delivered so the turn's end does not deliver them again as the next turn. `close` and
the sender both lock the session's row first, so a message is either written before the close
(and taken by it) or sees the turn no longer listening (and waits for the next turn): none is
lost between the two. `close(take=0)`, for an agent already gone, leaves what is waiting to
the next turn, as a take beyond its limit does, and `give_back` queues again what was taken
and never written to the agent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import Engine, bindparam, update
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession

from scheduler.engine.records import lock
from scheduler.store.db import core, session_scope
from scheduler.store.models import EnqueuedMessage, Turn

log = logging.getLogger("pacer.inbox")

TAKE_SECONDS = 0.5  # how often a listening turn's runner looks for new messages
_QUEUED, _TURNS = EnqueuedMessage.__table__, Turn.__table__  # type: ignore[attr-defined]
_WAITING = (
    sa_select(_QUEUED.c.id, _QUEUED.c.prompt)
    .where(_QUEUED.c.session_id == bindparam("sid"), _QUEUED.c.kind == "human", _QUEUED.c.delivered_at.is_(None))
    .order_by(_QUEUED.c.id)
)
_ANY_WAITING = _WAITING.with_only_columns(_QUEUED.c.id).limit(1)


class DbInbox:
    """`scheduler.ports.TurnInbox` over the session's message queue and the turn's row."""

    def __init__(
        self, engine: Engine, session_id: int, turn_id: int, now: Callable[[], datetime] | None = None
    ) -> None:
        self.engine = engine
        self.session_id = session_id
        self.turn_id = turn_id
        self._now = now

    def open(self) -> None:
        self._listening(True)

    def take(self, limit: int) -> list[tuple[int, str]]:
        if limit <= 0:
            return []
        with session_scope(self.engine) as db:
            if core(db, _ANY_WAITING, {"sid": self.session_id}).first() is None:
                return []  # the common case: one indexed read, no lock
        with session_scope(self.engine) as db:
            lock(db, self.session_id)
            return self._taken(db, limit)

    def close(self, *, take: int) -> list[tuple[int, str]]:
        with session_scope(self.engine) as db:
            lock(db, self.session_id)  # a sender holds it while it decides; so does this
            core(db, update(_TURNS).where(_TURNS.c.id == self.turn_id).values(listening=False))
            return self._taken(db, take) if take > 0 else []

    def give_back(self, ids: list[int]) -> None:
        """Messages taken and never written to the agent: queued again, for the next turn."""
        if ids:
            with session_scope(self.engine) as db:
                core(db, update(_QUEUED).where(_QUEUED.c.id.in_(ids)).values(delivered_at=None))

    def _taken(self, db: DBSession, limit: int) -> list[tuple[int, str]]:
        rows = core(db, _WAITING.limit(limit), {"sid": self.session_id}).all()
        if rows:
            stamp = self._now() if self._now is not None else datetime.now(UTC)
            core(db, update(_QUEUED).where(_QUEUED.c.id.in_([r.id for r in rows])).values(delivered_at=stamp))
        return [(int(r.id), str(r.prompt)) for r in rows]

    def _listening(self, value: bool) -> None:
        with session_scope(self.engine) as db:
            core(db, update(_TURNS).where(_TURNS.c.id == self.turn_id).values(listening=value))
