"""`pacer console`: the chat surface in a terminal (the shell-adapter convention)."""

from __future__ import annotations

import sys
from typing import TextIO

from bot import runtime
from bot.render import render
from bot.settings import Settings

USAGES = ("help — this list", "quit — leave the console")


def answer(line: str, *, user: str) -> str:
    text = line.strip()
    if not text or text in {"help", "/pacer help", "/pacer"}:
        return render("text/help.j2", usages=USAGES)
    return f"unknown command {text.split()[0]!r}; try help"


def run_console(settings: Settings, *, user: str | None = None, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    runtime.build(settings, migrate=True, deferrer=_NullDeferrer())
    who = user or settings.console_user
    stdout.write(f"Pacer console as {who}. Type help, or quit.\n")
    for line in stdin:
        if line.strip() in {"quit", "exit"}:
            break
        stdout.write(answer(line, user=who) + "\n")
        stdout.flush()
    return 0


class _NullDeferrer:
    """The console does not run the scheduler; a live `pacer serve` owns the alarms."""

    def schedule(self, job_id, at, func, *args):  # type: ignore[no-untyped-def]
        return None

    def cancel(self, job_id):  # type: ignore[no-untyped-def]
        return False

    def next_run(self, job_id):  # type: ignore[no-untyped-def]
        return None
