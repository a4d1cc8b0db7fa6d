"""Events API listeners: messages and mentions (`@Pacer <prompt>`) become intake, `app_home_opened`
publishes the Home tab.

Bolt acks events itself, before the listener runs, and does not dedupe Slack's retries (a retry
carries `X-Slack-Retry-Num` and the same `event_id`). So every message is recorded in
`slack_events` first; the unique `event_id` makes the second delivery insert nothing, on SQLite
and PostgreSQL alike, even when both deliveries race. A message reaches intake at most once.

Intake decides; this edge speaks. When intake hands back a `SenderNotice` (someone off the
roster wrote to Pacer), its sentence goes to the sender alone: in a DM as a reply, in a channel
as an ephemeral message nobody else sees.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from slack_bolt import App
from slack_sdk import WebClient
from sqlalchemy.exc import IntegrityError

from bot.runtime.process import Pacer
from bot.slack.edge import SlackEdge, message_lines
from bot.slack.home import open_home
from bot.slack.intake import WORKSPACE_URL, SenderNotice, slack_mention
from scheduler.bounds import clean_text, clean_tree
from scheduler.front import SlackEvent

log = logging.getLogger("pacer.slack")

# Returns a SenderNotice when the sender must be told something; anything else is not shown.
Intake = Callable[[Pacer, dict[str, Any]], object]


def register(app: App, edge: SlackEdge) -> None:
    def on_message(body: dict[str, Any], event: dict[str, Any], client: WebClient) -> None:
        if is_ignored(event):
            return
        edge.submit_in_turn(message_lines(event), "message intake", take_message, edge.pacer, body, edge.intake, client)

    def on_home_opened(event: dict[str, Any], client: WebClient) -> None:
        if event.get("tab", "home") != "home":  # the Messages tab fires this event too
            return
        edge.submit("App Home", open_home, edge.pacer, client, str(event["user"]))

    def on_mention(body: dict[str, Any], event: dict[str, Any], client: WebClient) -> None:
        if is_ignored(event):
            return
        edge.submit_in_turn(
            message_lines(event), "mention intake", take_message, edge.pacer, body, slack_mention, client
        )

    app.event("message")(on_message)
    app.event("app_mention")(on_mention)
    app.event("app_home_opened")(on_home_opened)


def is_ignored(event: Mapping[str, Any]) -> bool:
    """Bots (Pacer included) and every subtype (edits, deletes, joins, bot_message) start nothing."""
    return bool(event.get("bot_id") or event.get("subtype") or not event.get("user"))


def record_event(pacer: Pacer, event_id: str) -> bool:
    """Store `event_id`; False when it was already stored (a retry or a duplicate delivery)."""
    try:
        with pacer.db() as db:
            db.add(SlackEvent(event_id=event_id, received_at=pacer.clock.now()))
            db.flush()
    except IntegrityError:
        return False
    return True


def take_message(pacer: Pacer, body: Mapping[str, Any], handoff: Intake, client: WebClient) -> None:
    """Record the delivery, then hand the message to `handoff` (intake) once, and tell the
    sender what intake asked to."""
    # Cleaned before the event id is recorded: intake stores what it is handed, and text neither
    # database takes (NUL, a lone surrogate) would fail after the id was taken, and every retry
    # of the message would then be dropped as a duplicate.
    raw = body.get("event")
    event: dict[str, Any] = clean_tree(dict(raw)) if isinstance(raw, Mapping) else {}
    event_id = clean_text(str(body.get("event_id") or ""))
    if not event_id:
        log.warning("slack: a message event without event_id was dropped (channel %s)", event.get("channel"))
        return
    if not record_event(pacer, event_id):
        log.info("slack: event %s already taken; this delivery is a retry", event_id)
        return
    learn_workspace(pacer, client)
    notice = handoff(pacer, event)
    if isinstance(notice, SenderNotice):
        tell_sender(client, event, notice.text)


def learn_workspace(pacer: Pacer, client: WebClient) -> None:
    """Ask Slack once a process for the workspace's address (`auth.test`'s `url`), so a session
    born of a message can link its thread; a failure leaves links to the channel and asks again
    at the next message."""
    if pacer.extras.get(WORKSPACE_URL):
        return
    try:
        url = client.auth_test().get("url")
    except Exception as exc:  # a thread link is a convenience: intake goes on without it
        log.info("slack: auth.test failed (%s); links point at the channel, not the thread", type(exc).__name__)
        return
    if isinstance(url, str) and url.startswith("https://"):
        pacer.extras[WORKSPACE_URL] = url


def tell_sender(client: WebClient, event: Mapping[str, Any], text: str) -> None:
    """`text` to the person who sent `event` and to nobody else."""
    channel, user, thread_ts = str(event["channel"]), str(event["user"]), event.get("thread_ts")
    if event.get("channel_type") == "im":
        client.chat_postMessage(channel=channel, text=text, thread_ts=thread_ts, unfurl_links=False)
    else:
        client.chat_postEphemeral(channel=channel, user=user, text=text, thread_ts=thread_ts)

