"""`pacer console`: the chat surface in a terminal (the shell-adapter convention).

Every line goes through `bot.chat.answers.answer` exactly as a Slack `/pacer` does, as the chosen roster
user, and comes back rendered from the text templates. Reading is open at the console; changing
anything needs the user on the roster (`PACER_ROSTER=console=operator`). `reply <id> <text>`
is a thread reply typed here.

At a terminal it is a prompt (`pacer> `) with line editing, history (`~/.pacer_history`, kept
between runs) and command names completed by Tab, where Python has `readline`; `clear` clears
the screen; `quit`, `exit` or Ctrl-D leaves; Ctrl-C drops the line being typed. Lines piped in
are answered one by one with no prompt. The log lines of the scheduler it runs go to a file
(`--log`), so they never land between the answers.
"""

from __future__ import annotations

import cmd
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from bot.config.settings import Settings
from bot.observe import logs
from bot.runtime.address import reachable_url
from bot.runtime.leader import Leadership, leader_address
from scheduler.front import make_engine
from templates import render

if TYPE_CHECKING:
    from bot.runtime.process import Pacer

# The chat handlers, the runtime and the server are imported where the console leads the
# scheduler itself: a console that speaks to a running server needs none of them, and starts
# in a third of the time.

SURFACE = "console"
QUIT = frozenset({"quit", "exit"})
CLEAR = frozenset({"clear", "cls"})
PROMPT = "pacer> "
HISTORY = Path("~/.pacer_history")
HISTORY_LINES = 1000
CLEAR_SCREEN = "\033[H\033[2J"


def answer(pacer: Pacer, line: str, *, user: str) -> str:
    from bot.chat import answers

    return answers.answer(pacer, user, line, surface=SURFACE).text


def run_console(
    settings: Settings,
    *,
    user: str | None = None,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
    log: str | None = None,
) -> int:
    """Lead the scheduler in this process when nothing else does (alarms, sweeps and turns run
    here while the console is open); when a `pacer serve` leads, speak to it over its API, so
    its scheduler — the only one on this database — runs what the console asks for.

    `log`: where log lines go — a file, `-` for stderr, None to leave logging as it is."""
    if log is not None and log != "-":
        logs.configure(settings.log_level, settings.log_format, file=log)
    who = user or settings.console_user
    engine = make_engine(settings.database_url)
    probe = Leadership(engine, lambda: None)
    if not probe.start():
        probe.stop()
        return _forward(settings, stdin, stdout, server=leader_address(engine))
    probe.stop()
    from bot.config import checks as settings_checks
    from bot.runtime import process

    settings_checks.check(settings, os.environ, serving=False)  # turns run here: the agent must be on PATH
    pacer = process.build(settings, migrate=True)
    process.start(pacer)
    logged = None if log in (None, "-") else log
    banner = render("text/console_banner.j2", user=who, role=settings.roster.get(who), log=logged)
    try:
        return converse(lambda line: answer(pacer, line, user=who), banner, stdin, stdout)
    finally:
        process.stop(pacer)


def _forward(settings: Settings, stdin: TextIO, stdout: TextIO, *, server: str | None = None) -> int:
    """Speak to the leading server at the address it advertised (`bot.runtime.leader`); PACER_HOST and
    PACER_PORT only when it advertised none. The server says who the token speaks for and with which
    role (GET /api/v1/me), and the banner says that, not what this console's settings would guess."""
    import httpx

    api = f"{server or reachable_url(settings.host, settings.port)}/api/v1"
    base = f"{api}/chat"
    if not settings.api_token:
        stdout.write(render("text/console_no_token.j2", url=base) + "\n")
        return 2
    # Through the API the console is whoever its token proves: the shared token's automation,
    # 'api token', with the server's PACER_API_ROLE (README, "Who the API speaks for").
    headers = {"Authorization": f"Bearer {settings.api_token}"}
    with httpx.Client(timeout=30, headers=headers) as client:
        try:
            asked = client.get(f"{api}/me")
            me = asked.json()
        except (httpx.HTTPError, ValueError) as exc:
            stdout.write(render("text/console_server_gone.j2", url=api, error=type(exc).__name__) + "\n")
            return 1
        if asked.status_code != 200:
            stdout.write(render("text/console_refused.j2", url=api, message=me.get("message", asked.text)) + "\n")
            return 2

        def ask(line: str) -> str:
            try:
                answered = client.post(base, json={"text": line})
                text = answered.json().get("text") or answered.json().get("message", answered.text)
            except (httpx.HTTPError, ValueError) as exc:
                text = render("text/console_server_gone.j2", url=base, error=type(exc).__name__)
            return str(text)

        banner = "\n".join((
            render("text/console_banner.j2", user=me["name"], role=me["role"], log=None),
            render("text/console_forwarding.j2", url=base, person=me["person"]),
        ))
        return converse(ask, banner, stdin, stdout)


def converse(ask: Callable[[str], str], banner: str, stdin: TextIO, stdout: TextIO) -> int:
    """The banner, then each line answered by `ask` until quit or the end of input."""
    shell = Shell(ask, stdin, stdout)
    stdout.write(banner + "\n")
    stdout.flush()
    history = shell.load_history()
    try:
        while True:
            try:
                shell.cmdloop()
                return 0
            except KeyboardInterrupt:  # Ctrl-C drops the line being typed, as a shell does
                stdout.write("\n")
    finally:
        if history is not None:
            shell.save_history(history)


class Shell(cmd.Cmd):
    """The prompt: every line but quit, clear and a blank one is `ask`ed and its answer written."""

    def __init__(self, ask: Callable[[str], str], stdin: TextIO, stdout: TextIO) -> None:
        self.interactive = stdin.isatty() and stdout.isatty() and _readline() is not None
        super().__init__(completekey="tab", stdin=stdin, stdout=stdout)
        self.ask = ask
        self.use_rawinput = self.interactive  # input() edits the line through readline; a pipe is read as is
        self.prompt = PROMPT if self.interactive else ""

    def onecmd(self, line: str) -> bool:
        said = line.strip()
        if said == "EOF" or said.lower() in QUIT:
            if said == "EOF" and self.interactive:
                self.stdout.write("\n")
            return True
        if said.lower() in CLEAR:
            self.stdout.write(CLEAR_SCREEN)
        elif said:
            self.stdout.write(self.ask(said) + "\n")
        self.stdout.flush()
        return False

    def emptyline(self) -> bool:  # cmd's default repeats the last command: never here
        return False

    def completenames(self, text: str, *ignored: Any) -> list[str]:
        from bot.commands.grammar import NAMES

        return [f"{name} " for name in (*NAMES, "quit", "clear") if name.startswith(text.lower())]

    def completedefault(self, *ignored: Any) -> list[str]:
        return []

    def load_history(self) -> Path | None:
        """Read the history file at a terminal; the path to save to, or None off one."""
        readline = _readline()
        if not self.interactive or readline is None:
            return None
        path = HISTORY.expanduser()
        readline.set_history_length(HISTORY_LINES)
        try:
            readline.read_history_file(path)
        except OSError:  # none yet, or unreadable: start without
            pass
        return path

    def save_history(self, path: Path) -> None:
        readline = _readline()
        if readline is None:
            return
        try:
            readline.write_history_file(path)
        except OSError:  # a read-only home loses the history, not the session
            pass


def _readline() -> Any:
    """The `readline` module, or None where Python has none (Windows without pyreadline3)."""
    try:
        import readline
    except ImportError:
        return None
    return readline
