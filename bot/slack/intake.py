"""Slack intake: a message becomes a `slack` session; a reply in a session's thread from a
rostered human is a human message on that session (seed 001, "A human message jumps the queue").

Where Pacer listens: DMs to the bot, and the channels a `slack` trigger names
(`config.channels`; `config.dms = true` sends DMs through a trigger with its own prompt template,
class and precedence). Who starts work there: only people on the roster, as only authors with
write access start work from GitHub. A message from anyone else starts nothing, is logged once as
ignored, and its sender alone is told why (`templates/slack/not_on_roster.j2`). A message in a
channel no trigger names is not addressed to Pacer: logged and left alone, whoever wrote it —
unless it mentions Pacer (`@Pacer <prompt>`, `slack_mention`): that starts a session answered in
the message's thread, in any channel Pacer is in.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlmodel import col, select

from integrations.slack.notifier import thread_source
from scheduler.errors import PacerError
from scheduler.front import (
    NewSession,
    Session,
    Trigger,
    create_session,
    record_human_message,
    session_scope,
    submit_turn,
)
from templates import render, render_prompt

log = logging.getLogger("pacer.intake.slack")
WORKSPACE_URL = "slack_workspace_url"  # in Pacer's extras: the workspace's address (events.learn_workspace)

TITLE_CHARS = 80
MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")  # how Slack writes @Pacer (or anyone) into a message's text


@dataclass(frozen=True)
class SenderNotice:
    """What intake asks the Slack edge to tell a message's sender: one rendered sentence."""

    text: str


def thread_key(channel: str | None, thread_ts: str | None) -> str | None:
    return f"{channel}:{thread_ts}" if channel and thread_ts else None


def _trigger_for(db: Any, channel: str, is_dm: bool) -> Trigger | None:
    trigger: Trigger
    for trigger in db.exec(
        select(Trigger).where(Trigger.kind == "slack", col(Trigger.enabled).is_(True)).order_by(col(Trigger.id))
    ):
        config = trigger.config or {}
        if channel in (config.get("channels") or []) or (is_dm and config.get("dms")):
            return trigger
    return None


def slack_mention(pacer: Any, event: Mapping[str, Any]) -> int | SenderNotice | None:
    """`@Pacer <prompt>` (an `app_mention` event): a session answered in that thread. A mention
    the message listener takes anyway — in a channel a trigger names, or in a session's thread —
    is left to it, so one message makes one session or one reply."""
    channel, replied_to = str(event.get("channel") or ""), event.get("thread_ts")
    with session_scope(pacer.ctx.engine) as db:
        if _trigger_for(db, channel, False) is not None:
            return None
        if (
            replied_to
            and db.exec(select(Session.id).where(Session.thread_key == thread_key(channel, str(replied_to)))).first()
            is not None
        ):
            return None
    return slack_message(pacer, {**event, "text": MENTION.sub("", str(event.get("text") or ""))}, addressed=True)


def slack_message(pacer: Any, event: Mapping[str, Any], *, addressed: bool = False) -> int | SenderNotice | None:
    """Handle one de-duplicated message event. Returns the session it went to, or what its
    sender must be told when it starts nothing, or None. `addressed`: the message mentions
    Pacer, so no trigger need name its channel."""
    ctx = pacer.ctx
    roster: Mapping[str, str] = pacer.settings.roster
    user = str(event.get("user") or "")
    channel = str(event.get("channel") or "")
    text = str(event.get("text") or "").strip()
    is_dm = event.get("channel_type") == "im"
    if not user or not channel or not text:
        return None
    if len(text) > pacer.settings.max_prompt_chars:
        # Never silently: its event id is recorded, so a retry will not bring it back.
        log.warning("slack: a %d-character message from %s is over PACER_MAX_PROMPT_CHARS; ignored", len(text), user)
        return SenderNotice(render("slack/message_too_long.j2", chars=len(text), limit=pacer.settings.max_prompt_chars))
    replied_to = event.get("thread_ts")
    if replied_to and replied_to != event.get("ts"):
        with session_scope(ctx.engine) as db:
            session_id = db.exec(
                select(Session.id).where(Session.thread_key == thread_key(channel, str(replied_to)))
            ).first()
        if session_id is not None:
            return _reply(pacer, int(session_id), user, text, roster)
    now = ctx.clock.now()
    with session_scope(ctx.engine) as db:
        trigger = _trigger_for(db, channel, is_dm)
        if trigger is None and not (is_dm or addressed):
            log.info("slack: message from %s in %s matches no slack trigger; left alone", user, channel)
            return None
        if user not in roster:
            where = "a DM" if is_dm else f"a message in {channel}"
            log.info("slack: %s is not on the roster; %s from them starts nothing (ignored)", user, where)
            return SenderNotice(render("slack/not_on_roster.j2", user=user))
        prompt = text
        if trigger is not None and trigger.prompt_template:
            prompt = render_prompt(trigger.prompt_template, text=text, user=user, channel=channel) or text
        source = {"slack": thread_source(event, pacer.extras.get(WORKSPACE_URL))}
        session = create_session(
            db,
            NewSession(
                title=text.splitlines()[0][:TITLE_CHARS],
                genesis="slack",
                trigger_id=trigger.id if trigger else None,
                requester=user,
                source=source,
                declares=text,
            ),
            now=now,
        )
        session.prompt = prompt
        session.thread_key = thread_key(channel, source["slack"]["thread_ts"])
        db.add(session)
        db.flush()
        session_id = session.id or 0
    submit_turn(ctx, session_id, prompt, kind="first")
    return session_id


def _reply(pacer: Any, session_id: int, user: str, text: str, roster: Mapping[str, str]) -> int | SenderNotice | None:
    if user not in roster:
        log.info(
            "slack: %s is not on the roster; their reply in session #%s's thread is not a human message",
            user,
            session_id,
        )
        return None
    try:
        spoken = record_human_message(pacer.ctx, session_id, user, text, "slack_thread", roster=roster)
    except PacerError as exc:
        log.info("slack: reply to session #%s not delivered: %s", session_id, exc)
        return None
    if spoken.delivery is not None:  # a turn runs: its agent reads it now, or it waits for the turn's end
        return SenderNotice(render("slack/reply_delivery.j2", session_id=session_id, delivery=spoken.delivery))
    return session_id
