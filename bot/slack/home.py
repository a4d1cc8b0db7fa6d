"""The App Home: the ranked queue and the gate card, published for one person.

Published when the person opens the Home tab and again after they act on it, so the rows they
see are never older than their last click.
"""

from __future__ import annotations

import logging

from slack_sdk import WebClient

from bot.runtime import Pacer
from bot.slack.edge import ask
from integrations.slack import messages

log = logging.getLogger("pacer.slack")

SURFACE = "slack_home"
HOME_QUESTION = "queue"


def publish_home(pacer: Pacer, client: WebClient, user_id: str) -> None:
    """views.publish the Home tab of `user_id`, answered as that user (roles apply)."""
    reply = ask(pacer, actor=user_id, text=HOME_QUESTION, surface=SURFACE)
    client.views_publish(user_id=user_id, view=messages.home_view(reply))
    log.debug("slack: published App Home for %s", user_id)
