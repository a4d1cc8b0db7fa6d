"""The App Home: the gate card and the burn-rate table above the ranked queue, published for one person.

Published when the person opens the Home tab, after they act on it, and when the queue moves
(`bot/slack/home_refresh.py`), so the card and the rows they see follow the queue.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from slack_sdk import WebClient
from slack_sdk.models.blocks import ContextBlock, MarkdownTextObject
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, delete, select

from bot.chat.gate_view import current_card
from bot.runtime.process import Pacer
from bot.slack import blocks
from bot.slack.edge import ask
from integrations.slack import messages
from scheduler.front import PROJECTION_MINUTES, SlackHomeViewer, burn_rows, cycling_now
from templates import render_chat

log = logging.getLogger("pacer.slack")

SURFACE = "slack_home"
HOME_QUESTION = "queue"
# Whose Home follows the queue: people who opened it within a day. Slack gives no "closed"
# event, and someone back the next morning opens it again, which publishes it afresh.
VIEWER_TTL = timedelta(hours=24)
MAX_VIEWERS = 200  # a refresh pass publishes at most this many Homes, the most recent openers


def home_view(pacer: Pacer, user_id: str) -> dict[str, Any]:
    """The Home tab of `user_id`, answered as that user (roles apply): someone the roster
    refuses the queue is shown the refusal and no card."""
    reply = ask(pacer, actor=user_id, text=HOME_QUESTION, surface=SURFACE)
    card: list[dict[str, Any]] = []
    if reply.ok:
        now = pacer.clock.now()
        try:
            card = messages.gate_card_blocks(current_card(pacer, now))
        except Exception:  # the queue is still worth showing without the card
            log.exception("slack: the gate card for %s's App Home could not be built", user_id)
        card += cycling_blocks(pacer, now) + burn_blocks(pacer)
    return messages.home_view(reply, above=card)


def cycling_blocks(pacer: Pacer, now: datetime) -> list[dict[str, Any]]:
    """The preemption cycling report under the gate card, as `/pacer holds` shows it; nothing
    when nothing cycles."""
    try:
        with pacer.db() as db:
            found = cycling_now(db, now)
    except Exception:  # the queue is still worth showing without the report
        log.exception("slack: the preemption cycling report for the App Home could not be read")
        return []
    return [block.to_dict() for block in blocks.cycling_blocks(found)]


def burn_blocks(pacer: Pacer) -> list[dict[str, Any]]:
    """The $/min of each runtime + model, as `/pacer burn` says it, under the card."""
    text = render_chat("burn", "slack", rates=burn_rows(pacer.ctx), minutes=PROJECTION_MINUTES)
    return [ContextBlock(elements=[MarkdownTextObject(text=text[: messages.SECTION_TEXT_LIMIT])]).to_dict()]


def publish_home(pacer: Pacer, client: WebClient, user_id: str) -> None:
    """views.publish the Home tab of `user_id`."""
    client.views_publish(user_id=user_id, view=home_view(pacer, user_id))
    log.debug("slack: published App Home for %s", user_id)


def open_home(pacer: Pacer, client: WebClient, user_id: str) -> None:
    """Someone opened the Home tab: remember them, then publish it."""
    remember_viewer(pacer, user_id, pacer.clock.now())
    publish_home(pacer, client, user_id)


def remember_viewer(pacer: Pacer, user_id: str, now: datetime) -> None:
    """Record that `user_id` opened the Home at `now`, and forget everyone past VIEWER_TTL."""
    try:
        with pacer.db() as db:
            row = db.get(SlackHomeViewer, user_id)
            if row is None:
                db.add(SlackHomeViewer(user_id=user_id, opened_at=now))
            else:
                row.opened_at = now
                db.add(row)
            db.exec(delete(SlackHomeViewer).where(col(SlackHomeViewer.opened_at) < now - VIEWER_TTL))
    except IntegrityError:
        log.debug("slack: %s opened the App Home on two replicas at once; one recorded it", user_id)


def recent_viewers(pacer: Pacer, now: datetime) -> list[str]:
    """Who opened the Home within VIEWER_TTL, most recent first, at most MAX_VIEWERS."""
    stmt = (
        select(SlackHomeViewer.user_id)
        .where(col(SlackHomeViewer.opened_at) >= now - VIEWER_TTL)
        .order_by(col(SlackHomeViewer.opened_at).desc())
        .limit(MAX_VIEWERS)
    )
    with pacer.db() as db:
        return list(db.exec(stmt).all())
