"""Reading an agent's output pipes while it runs: the tail a result is read from, the head
where the agent says which conversation it is in, and every line, for the provider's word on
the quota.

    head = Announcement(request.agent_session_id, request.on_agent_session)
    watch = ProviderWatch(sink, account="acct-1", clock=clock)
    out = Tail(proc.stdout, max_output_bytes, head, watch)   # a reader thread; out.start()
    out.text()          # the last bytes, once the agent is done
    out.heard_at        # time.monotonic() when the pipe last gave bytes (its start before any)
    head.said           # the agent's session id, as soon as it said it (else None)
    head.model          # the model its init line names (else None)
    watch.latest        # the last reading of each window the agent reported, by kind
    watch = ProviderWatch(sink, account="acct-1", clock=clock, progress=ProgressWatch(request.on_progress, workdir))
                        # ... and what the agent is doing, told as it changes (`progress`)

Claude Code with `--output-format stream-json --verbose` prints `{"type": "system", "subtype":
"init", "session_id": ...}` as its first line, long before its result: a turn cut off after that
line can still be resumed, if someone hears it. Only the head is parsed line by line (the first
`HEAD_BYTES`), so a chatty agent costs one JSON parse a line of its first megabyte, no more.

The whole stream is split into lines as it flows (`Lines`), for the quota readings the provider
prints mid-turn (`provider_events`): a line is parsed only when it names such an event, a line
longer than `LINE_BYTES` is skipped whole (no provider event is that long, and keeping it would
let one line fill memory), and each reading reaches the sink at once, on the reader's thread.
A sink that fails is logged and the stream read on: the agent must never block on a full pipe.

Each pipe notes when it last gave anything (`heard_at`), so the runner can tell an agent that
went silent (PACER_STALL_MINUTES) from one that works: any bytes count, a line in progress too.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

import integrations.runners.progress as progress_lines
from integrations.runners.outcomes import announced_model, announced_session
from integrations.runners.provider_events import is_candidate, provider_readings
from scheduler.ports import Clock, ProviderReading, ProviderSink, TurnProgress

log = logging.getLogger("pacer.runner")

HEAD_BYTES = 1_048_576  # the init line comes first; a tools list can make it long, never this long
LINE_BYTES = 65_536  # a provider event is a few hundred bytes; longer lines are the agent's output


class Announcement:
    """Finds the line of the head that names the agent's session, and tells `tell` once, on the
    reader's thread. A `tell` that fails is logged: the result still carries the id at the end."""

    def __init__(self, known: str | None, tell: Callable[[str], None] | None) -> None:
        self.known = known
        self.tell = tell
        self.said: str | None = None
        self.model: str | None = None
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
                text = line.decode("utf-8", errors="replace")
                self.model = self.model or announced_model(text)
                self._hear(announced_session(text))
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


class Lines:
    """Splits a byte stream into lines for `each`, holding at most one line of LINE_BYTES."""

    def __init__(self, each: Callable[[bytes], None]) -> None:
        self.each = each
        self._line = bytearray()
        self._skipping = False  # inside a line past LINE_BYTES: dropped up to its newline

    def feed(self, chunk: bytes) -> None:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if not self._skipping:
                self._line += chunk[start:end]
                if len(self._line) <= LINE_BYTES:
                    self.each(bytes(self._line))
            self._line.clear()
            self._skipping = False
            start = end + 1
        if not self._skipping:
            self._line += chunk[start:]
            if len(self._line) > LINE_BYTES:
                self._line.clear()
                self._skipping = True

    def close(self) -> None:
        """The stream ended: its last line, if it had no newline."""
        if self._line and not self._skipping:
            self.each(bytes(self._line))
        self._line.clear()


class ProgressWatch:
    """Follows what the agent is doing (`progress`: the tool in use, its todo list, its cost so
    far) and tells `tell` each change, on the reader's thread. A `tell` that fails is logged."""

    def __init__(self, tell: Callable[[TurnProgress], None] | None, root: str | None = None) -> None:
        self.tell = tell
        self.root = root
        self.latest = TurnProgress()

    def hear(self, line: bytes) -> None:
        if self.tell is None or not progress_lines.is_candidate(line):
            return
        after = progress_lines.next_progress(self.latest, line, root=self.root)
        if after == self.latest:
            return
        self.latest = after
        try:
            self.tell(after)
        except Exception:  # the reader must go on draining the pipe, or the agent blocks
            log.exception("recording the agent's progress failed; the turn goes on")


class ProviderWatch:
    """Hands every quota reading in the stream to `sink` as it is printed, and keeps the last of
    each window kind (a handful) for the turn's result; shows every line to `progress` too."""

    def __init__(
        self, sink: ProviderSink | None, *, account: str, clock: Clock, progress: ProgressWatch | None = None
    ) -> None:
        self.sink = sink
        self.account = account
        self.clock = clock
        self.progress = progress
        self.latest: dict[str, ProviderReading] = {}
        self.lines = Lines(self.hear)

    def hear(self, line: bytes) -> None:
        if self.progress is not None:
            self.progress.hear(line)
        if not is_candidate(line):
            return
        for reading in provider_readings(line, self.clock.now(), account=self.account):
            self.latest[reading.kind] = reading
            if self.sink is None:
                continue
            try:
                self.sink(reading)
            except Exception:  # the reader must go on draining the pipe, or the agent blocks
                log.exception("recording the provider's %s reading failed; the turn goes on", reading.kind)


class Tail(threading.Thread):
    """Drains one pipe, keeping only its last `limit` bytes, and shows its head to `head` and
    every line to `watch`."""

    def __init__(
        self, stream: object, limit: int, head: Announcement | None = None, watch: ProviderWatch | None = None
    ) -> None:
        super().__init__(daemon=True, name="pacer-runner-pipe")
        self._fd = stream.fileno()  # type: ignore[attr-defined]
        self._stream = stream
        self._limit = limit
        self._head = head
        self._watch = watch
        self._buffer = bytearray()
        self.total = 0
        self.heard_at = time.monotonic()  # silence is counted from the start, before the first byte

    def run(self) -> None:
        try:
            while chunk := os.read(self._fd, 65_536):
                self.heard_at = time.monotonic()
                self.total += len(chunk)
                if self._head is not None and self._head.listening:
                    self._head.feed(chunk)
                if self._watch is not None:
                    self._watch.lines.feed(chunk)
                self._buffer += chunk
                if len(self._buffer) > self._limit:
                    del self._buffer[: len(self._buffer) - self._limit]
            if self._watch is not None:
                self._watch.lines.close()
        except OSError:
            pass
        finally:
            self._stream.close()  # type: ignore[attr-defined]

    @property
    def truncated(self) -> bool:
        return self.total > self._limit

    def text(self) -> str:
        return bytes(self._buffer).decode("utf-8", errors="replace")


__all__ = ["HEAD_BYTES", "LINE_BYTES", "Announcement", "Lines", "ProgressWatch", "ProviderWatch", "Tail"]
