"""Block actions: the queue row menu and the hold buttons, each run as the `/pacer` command it means.

A button never carries its own logic: it names a command (`promote 42`), and chat answers it
exactly as if the person had typed it — same roles, same errors, same templates. The answer goes
back ephemerally: through the message's response_url, or as an ephemeral in the channel, or —
from the App Home, which has neither — as a direct message, after which the Home is republished.

The contract with the blocks `bot.slack.blocks` and the notifier build (action_id → the value it carries):

    pacer.queue_row          overflow; option values "promote:42" "start:42" "demote_top:42" "archive:42" "why:42"
    pacer.hold_release       button; value: the operator hold id, "7"
    pacer.queue_resume       button; value: ignored (resumes the queue)
    pacer.session_priority   button; value: the session id, "42" (the hold notice in a thread)
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient

from bot.runtime.process import Pacer
from bot.slack.blocks import HOLD_RELEASE, QUEUE_ROW
from bot.slack.edge import SlackEdge, ask, command_lines
from bot.slack.home import publish_home
from integrations.slack import messages
from integrations.slack.notifier import QUEUE_RESUME, SESSION_PRIORITY
from scheduler.errors import InvalidInput
from templates import error_text, render

log = logging.getLogger("pacer.slack")

# Overflow option verb -> the command text it runs, given the session id.
ROW_COMMANDS = {
    "promote": "promote {id}",
    "start": "start {id}",
    "demote_top": "demote {id} top",
    "archive": "archive {id}",
    "why": "why {id}",  # the row's reason and its bounded queue ladder (seed 000)
}
SURFACE = "slack"
_ID = re.compile(r"^[1-9][0-9]{0,17}$")


def register(app: App, edge: SlackEdge) -> None:
    def on_action(
        ack: Ack, body: dict[str, Any], action: dict[str, Any], client: WebClient, respond: Respond | None
    ) -> None:
        ack()
        edge.submit_in_turn(
            action_lines(body, action),
            f"action {action.get('action_id')}",
            run_action,
            edge.pacer,
            body,
            action,
            client,
            respond,
        )

    for action_id in (QUEUE_ROW, HOLD_RELEASE, QUEUE_RESUME, SESSION_PRIORITY):
        app.action(action_id)(on_action)


def command_for(action: Mapping[str, Any]) -> str:
    """The command text an action means; InvalidInput when its value names nothing Pacer knows."""
    action_id = action.get("action_id")
    if action_id == QUEUE_ROW:
        value = str(_mapping(action.get("selected_option")).get("value") or "")
        verb, _, target = value.partition(":")
        if verb not in ROW_COMMANDS:
            raise InvalidInput(
                error_text("slack/menu_verb_unknown", value=value, verbs=sorted(ROW_COMMANDS)), field="value"
            )
        return ROW_COMMANDS[verb].format(id=_session_id(target))
    if action_id == HOLD_RELEASE:
        return f"release {_session_id(str(action.get('value') or ''), what='hold id')}"
    if action_id == QUEUE_RESUME:
        return "resume"
    if action_id == SESSION_PRIORITY:
        return f"promote {_session_id(str(action.get('value') or ''))}"
    raise InvalidInput(error_text("slack/action_unknown", action_id=action_id), field="action_id")


def action_lines(body: Mapping[str, Any], action: Mapping[str, Any]) -> tuple[str, ...]:
    """The lines an action waits in: those of the command it means, typed by the clicking user."""
    user = str(_mapping(body.get("user")).get("id") or "")
    try:
        return command_lines(user, command_for(action))
    except InvalidInput:  # answered with what is wrong, in the user's line
        return command_lines(user, "")


def _session_id(raw: str, *, what: str = "session id") -> str:
    if not _ID.match(raw):
        raise InvalidInput(error_text("slack/not_an_id", what=what, raw=raw), field="value")
    return raw


def run_action(
    pacer: Pacer, body: Mapping[str, Any], action: Mapping[str, Any], client: WebClient, respond: Respond | None
) -> None:
    """Run the action's command as the clicking user and tell them the outcome, privately."""
    user = _mapping(body.get("user")).get("id")
    if not isinstance(user, str) or not user:
        log.warning("slack: a block action without a user id was ignored")
        return
    try:
        text = command_for(action)
    except InvalidInput as exc:
        log.warning("slack: action from %s carries no Pacer command: %s", user, exc)
        _tell(client, body, respond, user, {"text": render("slack/action_invalid.j2", problem=str(exc))})
        return
    reply = ask(pacer, actor=user, text=text, surface=SURFACE)
    _tell(client, body, respond, user, messages.message(reply))
    if _mapping(body.get("container")).get("type") == "view" or _mapping(body.get("view")).get("type") == "home":
        publish_home(pacer, client, user)


def _tell(
    client: WebClient, body: Mapping[str, Any], respond: Respond | None, user: str, content: dict[str, Any]
) -> None:
    channel = _mapping(body.get("channel")).get("id") or _mapping(body.get("container")).get("channel_id")
    if respond is not None and body.get("response_url"):
        respond(**content, response_type="ephemeral", replace_original=False)
    elif channel:
        client.chat_postEphemeral(channel=channel, user=user, **content)
    else:
        # The App Home has no channel and no response_url: the app's DM is the private reply.
        client.chat_postMessage(channel=user, **content)


def _mapping(value: Any) -> Mapping[str, Any]:
    """A payload field Slack sends as an object; anything else reads as an empty one."""
    return value if isinstance(value, Mapping) else {}
