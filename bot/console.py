"""`pacer console`: the chat surface in a terminal (the shell-adapter convention).

Every line goes through `bot.chat.answer` exactly as a Slack `/pacer` does, as the chosen roster
user, and comes back rendered from the text templates. Reading is open at the console; changing
anything needs the user on the roster (`PACER_ROSTER=console=operator`). `reply <id> <text>`
is a thread reply typed here.
"""

from __future__ import annotations

import sys
from typing import TextIO

from bot import chat, runtime
from bot.render import render
from bot.runtime import Pacer
from bot.settings import Settings

SURFACE = "console"
QUIT = frozenset({"quit", "exit"})


def answer(pacer: Pacer, line: str, *, user: str) -> str:
    return chat.answer(pacer, user, line, surface=SURFACE).text


def run_console(settings: Settings, *, user: str | None = None, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    pacer = runtime.build(settings, migrate=True, deferrer=_NullDeferrer())
    who = user or settings.console_user
    stdout.write(render("text/console_banner.j2", user=who, role=settings.roster.get(who)) + "\n")
    try:
        for line in stdin:
            if line.strip().lower() in QUIT:
                break
            if not line.strip():
                continue
            stdout.write(answer(pacer, line, user=who) + "\n")
            stdout.flush()
    finally:
        runtime.stop(pacer)
    return 0


class _NullDeferrer:
    """The console does not run the scheduler; a live `pacer serve` owns the alarms."""

    def schedule(self, job_id, at, func, *args):  # type: ignore[no-untyped-def]
        return None

    def cancel(self, job_id):  # type: ignore[no-untyped-def]
        return False

    def next_run(self, job_id):  # type: ignore[no-untyped-def]
        return None
