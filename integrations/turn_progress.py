"""A running turn's progress, from the runner to the store and the notifiers.

    book = ProgressBook(engine, owner, notifier.notify, clock.now)
    request = replace(request, on_progress=book.teller(turn_id))   # the workers give it to the runner
    book.ended(turn_id)                                             # the turn has ended

The runner tells each change of what its agent is doing (`scheduler.ports.TurnProgress`, read
from the stream by `integrations.runners.progress`) on its reader thread, as often as the agent
prints. The book keeps the latest and writes it on the turn's row at most once every
`WRITE_SECONDS` a turn (`scheduler.engine.leases.record_progress`: only while the turn runs and
is this process's), so the live page, the API and any other process read it, then emits one
`progress` notice (`session_id`, `turn_id`) to the notifier chain: the sticky status comment and
the Slack thread space their own edits (`integrations.spacing`). The last change of a burst is
always written, a gap after the one before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import Engine

from integrations.runners.progress import as_plain
from integrations.spacing import Spacing
from scheduler.engine.leases import record_progress
from scheduler.ports import TurnProgress

log = logging.getLogger("pacer.progress")

WRITE_SECONDS = 2.0  # a turn's progress row is written at most this often
PROGRESS = "progress"  # the notice


class ProgressBook:
    def __init__(
        self,
        engine: Engine,
        owner: str | None,
        notify: Callable[[str, Mapping[str, Any]], None] | None,
        now: Callable[[], datetime],
        *,
        gap: float = WRITE_SECONDS,
    ) -> None:
        self.engine = engine
        self.owner = owner
        self.notify = notify
        self.now = now
        self._latest: dict[int, tuple[TurnProgress, datetime]] = {}
        self._lock = threading.Lock()
        # Off the runner's reader thread: a slow database must never keep it from draining the pipe.
        self._spacing: Spacing[int] = Spacing(gap, self._write, name="progress-writes", inline=False)

    def teller(self, turn_id: int) -> Callable[[TurnProgress], None]:
        """What the runner of `turn_id` calls with each change of its agent's progress."""
        return partial(self.tell, turn_id)

    def tell(self, turn_id: int, progress: TurnProgress) -> None:
        with self._lock:
            self._latest[turn_id] = (progress, self.now())
        self._spacing.ask(turn_id)

    def ended(self, turn_id: int) -> None:
        self._spacing.drop(turn_id)
        with self._lock:
            self._latest.pop(turn_id, None)

    def _write(self, turn_id: int) -> None:
        with self._lock:
            told = self._latest.pop(turn_id, None)
        if told is None:
            return
        progress, at = told
        session_id = record_progress(self.engine, turn_id, self.owner, as_plain(progress), at)
        if session_id is not None and self.notify is not None:
            self.notify(PROGRESS, {"session_id": session_id, "turn_id": turn_id})


__all__ = ["PROGRESS", "WRITE_SECONDS", "ProgressBook"]
