"""`/pacer`: ack at once, answer later through the command's response_url.

The ack carries no body, so Slack shows nothing until the answer arrives; the answer is built on
the edge's work pool, so a slow query never holds an ack past Slack's 3 seconds, and in turn
behind its author's earlier commands and those on the same sessions (`edge.command_lines`).
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import Ack, App, Respond

from bot.runtime.process import Pacer
from bot.slack.edge import SlackEdge, ask, command_lines
from integrations.slack import messages

log = logging.getLogger("pacer.slack")

COMMAND = "/pacer"
SURFACE = "slack"


def register(app: App, edge: SlackEdge) -> None:
    def pacer_command(ack: Ack, command: dict[str, Any], respond: Respond) -> None:
        ack()
        lines = command_lines(str(command.get("user_id") or ""), str(command.get("text") or ""))
        edge.submit_in_turn(
            lines, f"{COMMAND} {command.get('text', '')[:40]!r}", answer_command, edge.pacer, command, respond
        )

    app.command(COMMAND)(pacer_command)


def answer_command(pacer: Pacer, command: dict[str, Any], respond: Respond) -> None:
    """Ask chat for the answer as the person who typed it, and post it where they typed it."""
    user = str(command.get("user_id") or "")
    reply = ask(pacer, actor=user, text=str(command.get("text") or ""), surface=SURFACE)
    sent = respond(
        **messages.message(reply),
        response_type="in_channel" if reply.in_channel else "ephemeral",
    )
    if sent.status_code != 200:
        log.warning("slack: response_url refused the /pacer answer for %s (HTTP %s)", user, sent.status_code)
