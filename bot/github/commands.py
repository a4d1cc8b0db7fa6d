"""`/pacer <command>` at the start of a GitHub comment: the command runs as the comment's author,
through the handler every surface shares (`bot.chat.answers.answer`), and the answer is a reply comment.

Roles: write access on the repository (the trust `bot.github.events.is_trusted` checks) makes
its holder a member; the roster may name a GitHub login as `github:<login>=operator`. Someone
without write access gets no answer at all, so a public repository's strangers cannot probe the
queue through comments.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from bot.chat import answers
from bot.chat.roles import Role, role_of
from bot.github.events import IntakeEvent, is_trusted, who_acted
from bot.runtime.adapters import github_clients
from bot.runtime.process import Pacer
from integrations.github.replies import PyGithubReplies, ReplyPort
from integrations.github.status import Where
from templates import render

log = logging.getLogger("pacer.intake")

COMMAND = re.compile(r"\A\s*/pacer(?:[ \t]+(?P<text>[^\n]*))?\s*(?:\n|\Z)", re.IGNORECASE)


@dataclass(frozen=True)
class CommentCommand:
    """A `/pacer` line someone with write access wrote, and where to answer it."""

    actor: str  # github:<login>
    text: str  # what followed /pacer: the command line
    where: Where


def command_text(comment: str) -> str | None:
    """The command line of a comment that begins with `/pacer`, or None. `/pacer` alone asks for help."""
    found = COMMAND.match(comment)
    if found is None:
        return None
    return (found.group("text") or "help").strip() or "help"


def comment_command(event: IntakeEvent, actor: str) -> CommentCommand | None:
    """The command of a `/pacer` comment by someone with write access; None (logged) otherwise."""
    text = command_text(event.comment or "")
    if text is None:
        return None
    if not is_trusted(event):
        login, association = who_acted(event)
        log.info("github: /pacer %s on %s by %s (%s) is not run: only people with write access command Pacer",
                 text, event.issue_key, login, association)
        return None
    return CommentCommand(actor, text, Where(event.repository, event.number, event.installation_id))


def run_comment_command(pacer: Pacer | Any, command: CommentCommand, *, replies: ReplyPort | None = None) -> str | None:
    """Run it and post the answer; returns the answer's text (None: not run, or no GitHub
    credentials to answer with). It needs the whole runtime (its settings and roster): given a
    bare Context it is logged and not run."""
    if not isinstance(pacer, Pacer):
        log.warning(
            "github: /pacer %s by %s is not run: intake was given no runtime to run it in", command.text, command.actor
        )
        return None
    role = role_of(pacer.settings.roster, command.actor) or Role.MEMBER
    answer = answers.answer(pacer, command.actor, command.text, surface="github", role=role)
    body = render(
        "github/command_reply.j2", actor=command.actor.removeprefix("github:"), command=command.text, answer=answer
    )
    if replies is None:
        clients = github_clients(pacer.settings)
        if clients is None:
            log.info(
                "github: /pacer %s by %s answered only in this log: no GITHUB_TOKEN or App\n%s",
                command.text,
                command.actor,
                answer.text,
            )
            return None
        replies = PyGithubReplies(clients)
    replies.reply(command.where, body)
    return answer.text


def tell_commenter(
    pacer: Pacer | Any, where: Where, actor: str, session_id: int, delivery: str, *, replies: ReplyPort | None = None
) -> None:
    """Answer a comment sent to a session while its turn runs: it reached the running agent, or it
    waits for the turn's end. Without credentials (or a runtime) it is only logged."""
    clients = github_clients(pacer.settings) if replies is None and isinstance(pacer, Pacer) else None
    replies = replies or (PyGithubReplies(clients) if clients is not None else None)
    if replies is None:
        log.info("github: the comment on #%s went %s; no GitHub credentials to say so", session_id, delivery)
        return
    replies.reply(where, render("github/comment_delivery.j2", actor=actor.removeprefix("github:"),
                                session_id=session_id, delivery=delivery))
