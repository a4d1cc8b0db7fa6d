"""Reading an agent's output pipes while it runs: the tail a result is read from, and the head
where the agent says which conversation it is in.

    head = Announcement(request.agent_session_id, request.on_agent_session)
    out = Tail(proc.stdout, max_output_bytes, head)   # a reader thread; out.start()
    out.text()          # the last bytes, once the agent is done
    head.said           # the agent's session id, as soon as it said it (else None)

Claude Code with `--output-format stream-json --verbose` prints `{"type": "system", "subtype":
"init", "session_id": ...}` as its first line, long before its result: a turn cut off after that
line can still be resumed, if someone hears it. Only the head is read line by line (the first
`HEAD_BYTES`), so a chatty agent costs one JSON parse a line of its first megabyte, no more.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from integrations.runners.outcomes import announced_session

log = logging.getLogger("pacer.runner")

HEAD_BYTES = 1_048_576  # the init line comes first; a tools list can make it long, never this long


class Announcement:
    """Finds the line of the head that names the agent's session, and tells `tell` once, on the
    reader's thread. A `tell` that fails is logged: the result still carries the id at the end."""

    def __init__(self, known: str | None, tell: Callable[[str], None] | None) -> None:
        self.known = known
        self.tell = tell
        self.said: str | None = None
        self._line = bytearray()
        self._read = 0

    @property
    def listening(self) -> bool:
        return self.said is None and self._read < HEAD_BYTES

    def feed(self, chunk: bytes) -> None:
        chunk = chunk[: HEAD_BYTES - self._read]
        self._read += len(chunk)
        self._line += chunk
        while self.said is None and (end := self._line.find(b"\n")) >= 0:
            line = bytes(self._line[:end])
            del self._line[: end + 1]
            if b'"session_id"' in line:
                self._hear(announced_session(line.decode("utf-8", errors="replace")))
        if not self.listening:
            self._line.clear()

    def _hear(self, session_id: str | None) -> None:
        if session_id is None:
            return
        self.said = session_id
        if self.tell is None or session_id == self.known:
            return
        try:
            self.tell(session_id)
        except Exception:  # the reader must go on draining the pipe, or the agent blocks
            log.exception("recording agent session %s failed; the turn's result records it", session_id)


class Tail(threading.Thread):
    """Drains one pipe, keeping only its last `limit` bytes, and shows its head to `head`."""

    def __init__(self, stream: object, limit: int, head: Announcement | None = None) -> None:
        super().__init__(daemon=True, name="pacer-runner-pipe")
        self._fd = stream.fileno()  # type: ignore[attr-defined]
        self._stream = stream
        self._limit = limit
        self._head = head
        self._buffer = bytearray()
        self.total = 0

    def run(self) -> None:
        try:
            while chunk := os.read(self._fd, 65_536):
                self.total += len(chunk)
                if self._head is not None and self._head.listening:
                    self._head.feed(chunk)
                self._buffer += chunk
                if len(self._buffer) > self._limit:
                    del self._buffer[: len(self._buffer) - self._limit]
        except OSError:
            pass
        finally:
            self._stream.close()  # type: ignore[attr-defined]

    @property
    def truncated(self) -> bool:
        return self.total > self._limit

    def text(self) -> str:
        return bytes(self._buffer).decode("utf-8", errors="replace")


__all__ = ["HEAD_BYTES", "Announcement", "Tail"]
