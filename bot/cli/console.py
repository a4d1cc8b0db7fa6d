"""`pacer console`: the chat surface in a terminal (the shell-adapter convention).

Every line goes through `bot.chat.answers.answer` exactly as a Slack `/pacer` does, as the chosen roster
user, and comes back rendered from the text templates. Reading is open at the console; changing
anything needs the user on the roster (`PACER_ROSTER=console=operator`). `reply <id> <text>`
is a thread reply typed here.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from bot.api.callers import AUTOMATION
from bot.chat import answers
from bot.config import checks as settings_checks
from bot.config.settings import Settings
from bot.runtime import process
from bot.runtime.leader import Leadership, leader_address
from bot.runtime.process import Pacer
from bot.serve.server import reachable_url
from scheduler.front import make_engine
from templates import render

SURFACE = "console"
QUIT = frozenset({"quit", "exit"})


def answer(pacer: Pacer, line: str, *, user: str) -> str:
    return answers.answer(pacer, user, line, surface=SURFACE).text


def run_console(
    settings: Settings, *, user: str | None = None, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout
) -> int:
    """Lead the scheduler in this process when nothing else does (alarms, sweeps and turns run
    here while the console is open); when a `pacer serve` leads, speak to it over its API, so
    its scheduler — the only one on this database — runs what the console asks for."""
    who = user or settings.console_user
    engine = make_engine(settings.database_url)
    probe = Leadership(engine, lambda: None)
    if not probe.start():
        probe.stop()
        return _forward(settings, who, stdin, stdout, server=leader_address(engine))
    probe.stop()
    settings_checks.check(settings, os.environ, serving=False)  # turns run here: the agent must be on PATH
    pacer = process.build(settings, migrate=True)
    process.start(pacer)
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
        process.stop(pacer)
    return 0


def _forward(settings: Settings, who: str, stdin: TextIO, stdout: TextIO, *, server: str | None = None) -> int:
    """Speak to the leading server at the address it advertised (`bot.runtime.leader`); PACER_HOST and
    PACER_PORT only when it advertised none."""
    import httpx

    base = f"{server or reachable_url(settings.host, settings.port)}/api/v1/chat"
    if not settings.api_token:
        stdout.write(render("text/console_no_token.j2", url=base) + "\n")
        return 2
    # Through the API the console is the shared token's automation: a token proves no person, so
    # it cannot speak for PACER_CONSOLE_USER there (README, "Who the API speaks for").
    headers = {"Authorization": f"Bearer {settings.api_token}"}
    stdout.write(render("text/console_banner.j2", user=AUTOMATION, role=settings.api_role) + "\n")
    stdout.write(render("text/console_forwarding.j2", url=base) + "\n")
    with httpx.Client(timeout=30) as client:
        for line in stdin:
            if line.strip().lower() in QUIT:
                break
            if not line.strip():
                continue
            try:
                answered = client.post(base, json={"text": line.strip()}, headers=headers)
                text = answered.json().get("text") or answered.json().get("message", answered.text)
            except (httpx.HTTPError, ValueError) as exc:
                text = render("text/console_server_gone.j2", url=base, error=type(exc).__name__)
            stdout.write(str(text) + "\n")
            stdout.flush()
    return 0
