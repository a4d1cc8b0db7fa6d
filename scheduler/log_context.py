"""The session a log line is about, for the log pipeline to stamp on every line.

Set where a turn or queue decision for one session runs (`submit_turn`, `admit`,
`complete_turn`); every line logged inside — by the gate's checks, preemption, the notices —
then carries the session's id without each call spelling it out. A contextvar, so each thread
and each asyncio task sees its own, and a worker thread's next task does not inherit the last one's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

SESSION_ID: ContextVar[int | None] = ContextVar("pacer_session_id", default=None)


@contextmanager
def about_session(session_id: int | None = None) -> Iterator[None]:
    """Lines logged inside are about `session_id` (when given; `name_session` can name it later
    inside the block). The session named before is restored on the way out."""
    token = SESSION_ID.set(session_id if session_id is not None else SESSION_ID.get())
    try:
        yield
    finally:
        SESSION_ID.reset(token)


def name_session(session_id: int | None) -> None:
    """Inside an `about_session` block: the lines from here on are about `session_id`."""
    if session_id is not None:
        SESSION_ID.set(session_id)
