"""An agent that takes streamed input: people's messages reach it while its turn runs.

Claude Code run with `--input-format stream-json` (and `--output-format stream-json`) reads its
prompt from stdin as JSON lines, one user message a line:

    {"type":"user","message":{"role":"user","content":[{"type":"text","text":"..."}]}}

and takes each further line as the person speaking again, until stdin closes; it answers each
with a `result` line and exits at the end of its input. So the turn's prompt is its first line,
the pipe stays open while the agent works, and `Listener` hands it the messages sent to the
session meanwhile (`scheduler.ports.TurnInbox`, `integrations.turn_inbox`), then closes the
pipe once the agent has answered (its first `result` line), having handed it the last ones: a
message written before the close is read before the end of input, and one sent after it waits
for the next turn. Without an inbox, the pipe closes after the prompt.

The agent is not trusted to read. Its stdin is written by `StdinFeed`, a thread of its own with
the descriptor non-blocking: the supervisor and the listener only queue lines (at most
MAX_PENDING waiting; no more messages are taken from the inbox than there is room for, so the
rest stay queued, for later in the turn or the next one), a full pipe is waited on in short polls that see a stop, and a
pipe the agent closed (EPIPE) ends the feed, after which nothing more is taken. A message taken
and not yet written when the agent ends is given back to the session's queue: the next turn.
"""

from __future__ import annotations

import json
import logging
import os
import select
import threading
from collections import deque
from typing import Any

from integrations.runners.streams import ProgressWatch
from scheduler.ports import TurnInbox

log = logging.getLogger("pacer.runner")

MAX_PENDING = 32  # lines queued for the agent's stdin and not yet written
WRITE_POLL_SECONDS = 0.2  # a full pipe is waited on this long at a time, between looks at the stop flag
TAKE_SECONDS = 0.5  # how often the listener looks in the inbox


def user_line(text: str) -> bytes:
    """One person's message as a stream-json input line."""
    message = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]}}
    return (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8", errors="replace")


class StdinFeed(threading.Thread):
    """Writes queued lines to the agent's stdin without ever blocking whoever queues them."""

    def __init__(self, stdin: Any) -> None:
        super().__init__(daemon=True, name="pacer-runner-stdin")
        self._stdin = stdin
        self._fd = stdin.fileno()
        os.set_blocking(self._fd, False)
        self._lines: deque[bytes] = deque()
        self._wake = threading.Condition()
        self._closing = False  # close once what is queued is written
        self._stop = False  # stop now: the agent has ended
        self.broken = False  # the agent closed its end
        self.written = 0  # lines written whole, the prompt's first

    def say(self, line: bytes) -> bool:
        """Queue `line`; False when the feed is closed, broken or full."""
        with self._wake:
            if self._closing or self._stop or self.broken or len(self._lines) >= MAX_PENDING:
                return False
            self._lines.append(line)
            self._wake.notify()
            return True

    @property
    def room(self) -> int:
        """How many more lines it takes now (MAX_PENDING less those not yet written)."""
        with self._wake:
            return MAX_PENDING - len(self._lines)

    def reader_gone(self) -> bool:
        """Whether the agent has closed its end of the pipe (nothing written would reach it)."""
        try:
            poller = select.poll()
            poller.register(self._fd, select.POLLOUT)
            return any(ev & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _fd, ev in poller.poll(0))
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        """End the agent's input once what is queued is written."""
        with self._wake:
            self._closing = True
            self._wake.notify()

    def stop(self) -> None:
        """The agent has ended: drop what is queued and let go of the pipe."""
        with self._wake:
            self._stop = True
            self._wake.notify()

    def run(self) -> None:
        try:
            while True:
                with self._wake:
                    while not self._lines and not self._closing and not self._stop:
                        self._wake.wait()
                    if self._stop or (self._closing and not self._lines):
                        return
                    line = self._lines.popleft()
                if not self._write(line):
                    return
                self.written += 1
        finally:
            try:
                self._stdin.close()
            except OSError:
                pass

    def _write(self, data: bytes) -> bool:
        view = memoryview(data)
        while view:
            if self._stop:
                return False
            try:
                view = view[os.write(self._fd, view):]
            except BlockingIOError:
                select.select([], [self._fd], [], WRITE_POLL_SECONDS)
            except OSError:  # EPIPE: the agent closed its stdin, or has ended
                self.broken = True
                log.info("the agent closed its input; later messages wait for the next turn")
                return False
        return True


class Answered(ProgressWatch):
    """A ProgressWatch that also notes the agent's first `result` line: its answer to the turn."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.event = threading.Event()

    def hear(self, line: bytes) -> None:
        super().hear(line)
        if not self.event.is_set() and b'"result"' in line:
            try:
                said = json.loads(line)
            except (ValueError, RecursionError):  # nested past the parser's depth: not a ValueError
                return
            if isinstance(said, dict) and said.get("type") == "result":
                self.event.set()


class Listener(threading.Thread):
    """Hands the inbox's messages to the agent while it works; closes its input once it answered."""

    def __init__(self, inbox: TurnInbox | None, feed: StdinFeed, answered: threading.Event) -> None:
        super().__init__(daemon=True, name="pacer-runner-inbox")
        self.inbox = inbox
        self.feed = feed
        self.answered = answered
        self._ended = threading.Event()
        self.handed: list[int] = []  # the ids of the messages queued for the agent, in order

    def end(self) -> None:
        """The agent has ended (or the turn was cut): stop listening, leaving the rest to the next
        turn, and give back what was queued for it and never written (its first line was the prompt)."""
        self._ended.set()
        self.join(timeout=5)
        unwritten = self.handed[max(self.feed.written - 1, 0):]
        if unwritten and self.inbox is not None:
            try:
                self.inbox.give_back(unwritten)
            except Exception:
                log.exception("giving back %d message(s) the agent never read failed", len(unwritten))

    def run(self) -> None:
        if self.inbox is None:
            self.feed.close()  # nobody can speak to it: the prompt is its whole input
            return
        try:
            self.inbox.open()
            while not self._ended.is_set() and not self.feed.broken:
                if self.answered.wait(TAKE_SECONDS):
                    self._hand(self.inbox.close(take=self.feed.room))
                    self.feed.close()
                    return
                if self.feed.reader_gone():
                    log.info("the agent closed its input; later messages wait for the next turn")
                    break
                self._hand(self.inbox.take(self.feed.room))
        except Exception:
            log.exception("reading the turn's inbox failed; its messages wait for the next turn")
        self.feed.close()
        try:
            self.inbox.close(take=0)
        except Exception:
            log.exception("closing the turn's inbox failed; its row says listening until the turn ends")

    def _hand(self, taken: list[tuple[int, str]]) -> None:
        refused = [message_id for message_id, text in taken if not self._say(message_id, text)]
        if refused and self.inbox is not None:
            log.info("%d message(s) for the running agent wait for the next turn: its input is closed", len(refused))
            self.inbox.give_back(refused)

    def _say(self, message_id: int, text: str) -> bool:
        if not self.feed.say(user_line(text)):
            return False
        self.handed.append(message_id)
        return True
