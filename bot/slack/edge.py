"""What every Slack listener needs besides Bolt's own arguments: the runtime, a work pool and
one way to ask `bot.chat.answers`.

A listener acks and hands the real work — asking `bot.chat.answers`, reading the database, calling the
Web API — to this pool, so the ack never waits on an answer: a burst of slow answers queues here
while every ack still goes back in milliseconds, well inside Slack's 3 seconds.

Steering is handed over in turn (`submit_in_turn`): a command, a button or a message waits for
the earlier work of its author and of the sessions or thread it names (`command_lines`,
`message_lines`), so one person's `promote 10`, `demote 10`, `demote 10 top` apply in the order
they arrived, while other people's work runs beside it on the pool. The order is this process's:
behind a load balancer, two commands that reach two replicas apply as each replica gets to them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any

from bot.chat import answers
from bot.chat.roles import subjects
from bot.commands import command as c
from bot.commands import parse
from bot.runtime.process import Pacer
from bot.slack.intake import slack_message
from integrations.tracked_pool import InOrder, TrackedPool, run_guarded
from scheduler.errors import CommandError
from templates import render_chat

log = logging.getLogger("pacer.slack")

# Answers are CPU-bound under the GIL (rendering 10,000 rows) with some database waits: measured
# with bench/commands.py, 2, 4 and 8 threads post answers at the same rate, and more threads only
# steal the GIL from the ack path. 4 keeps a database wait from idling the pool, and stays well
# inside PostgreSQL's pool (10 + 20 overflow) beside the HTTP and scheduler threads.
DEFAULT_WORK_THREADS = 4


# Bolt's own executor. With process_before_response=True (app.py) listeners run inline on the
# dispatching thread and Bolt uses this only for lazy listeners, which Pacer has none of.
DEFAULT_LISTENER_THREADS = 2


class SlackEdge:
    """The runtime, Bolt's executor and a bounded pool for the work after the ack."""

    def __init__(
        self,
        pacer: Pacer,
        *,
        work_threads: int = DEFAULT_WORK_THREADS,
        listener_threads: int = DEFAULT_LISTENER_THREADS,
        intake: Callable[[Pacer, dict[str, Any]], object] = slack_message,
    ) -> None:
        self.pacer = pacer
        self.intake = intake  # where a fresh Slack message goes
        self.listeners = TrackedPool(listener_threads, "slack-listener")
        self._pool = TrackedPool(work_threads, "slack-work")
        self._in_turn = InOrder(self._pool)

    def submit(self, what: str, func: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run func(*args) after the ack; an exception is logged with `what`, never raised."""
        return self._pool.submit(run_guarded, log, f"slack: {what}", func, *args)

    def submit_in_turn(self, lines: Iterable[str], what: str, func: Callable[..., Any], *args: Any) -> Future[Any]:
        """`submit`, once the work handed over earlier in any of `lines` has run."""
        return self._in_turn.submit(lines, run_guarded, log, f"slack: {what}", func, *args)

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait for Bolt's executor, then for the work handed off; True when all of it finished
        in time. A listener hands its work off before it returns, so this order misses nothing."""
        return self.listeners.drain(timeout) and self._in_turn.drain(timeout) and self._pool.drain(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Finish what was acked (Slack will not resend it), then stop both pools."""
        self.drain(timeout)
        self.listeners.shutdown(wait=False, cancel_futures=True)
        self._pool.shutdown(wait=False, cancel_futures=True)


def ask(pacer: Pacer, *, actor: str, text: str, surface: str) -> answers.Reply:
    """`bot.chat.answers.answer`, with a crash turned into a one-line reply (the trace goes to the log)."""
    try:
        return answers.answer(pacer, actor=actor, text=text, surface=surface)
    except Exception:
        log.exception("slack: answering %r for %s failed", text[:80], actor)
        return answers.Reply(text=render_chat("command_failed", "slack"), blocks=[], in_channel=False, ok=False)


def command_lines(actor: str, text: str) -> tuple[str, ...]:
    """The lines a `/pacer` command (or a button meaning one) waits in: its author's, each
    session it names, and one for holds, since a release names a hold rather than its sessions.
    A command that does not parse is answered with its error in its author's line."""
    lines = [f"person:{actor}"]
    try:
        command = parse(text)
    except CommandError:
        return tuple(lines)
    named = {*subjects(command), *getattr(command, "neighbours", ())}
    session_id = getattr(command, "session_id", None)
    if isinstance(session_id, int):
        named.add(session_id)
    lines += [f"session:{sid}" for sid in sorted(named)]
    if isinstance(command, c.Hold | c.Release | c.Resume):
        lines.append("holds")
    return tuple(lines)


def message_lines(event: Mapping[str, Any]) -> tuple[str, ...]:
    """The lines a message waits in: its author's and its thread's (a reply is a turn of the
    thread's session, and its replies reach the agent in the order they were written)."""
    thread = event.get("thread_ts") or event.get("ts")
    return (f"person:{event.get('user')}", f"thread:{event.get('channel')}:{thread}")
