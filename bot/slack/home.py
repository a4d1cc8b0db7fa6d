"""The App Home: the gate card above the ranked queue, published for one person.

Published when the person opens the Home tab, after they act on it, and when the queue moves
(`bot/slack/home_refresh.py`), so the card and the rows they see follow the queue.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk import WebClient

from bot.gate_view import current_card
from bot.runtime import Pacer
from bot.slack.edge import ask
from integrations.slack import messages

log = logging.getLogger("pacer.slack")

SURFACE = "slack_home"
HOME_QUESTION = "queue"


def home_view(pacer: Pacer, user_id: str) -> dict[str, Any]:
    """The Home tab of `user_id`, answered as that user (roles apply): someone the roster
    refuses the queue is shown the refusal and no card."""
    reply = ask(pacer, actor=user_id, text=HOME_QUESTION, surface=SURFACE)
    card: list[dict[str, Any]] = []
    if reply.ok:
        try:
            card = messages.gate_card_blocks(current_card(pacer, pacer.clock.now()))
        except Exception:  # the queue is still worth showing without the card
            log.exception("slack: the gate card for %s's App Home could not be built", user_id)
    return messages.home_view(reply, above=card)


def publish_home(pacer: Pacer, client: WebClient, user_id: str) -> None:
    """views.publish the Home tab of `user_id`."""
    client.views_publish(user_id=user_id, view=home_view(pacer, user_id))
    log.debug("slack: published App Home for %s", user_id)
