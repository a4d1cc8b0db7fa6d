"""The Slack side of `scheduler.ports.Notifier`: a session's news in its thread, queue holds in ops.

The scheduler emits `(event, context)` after its transaction commits (`scheduler/engine/effects.py`):
`effects.notice("held", session_id=…, reason=…, sentence=…, retry_at=…, title=…)` and the like. This
adapter looks the session up, finds its Slack thread, renders `templates/slack/session_<event>.j2`
with the session and the whole context, and posts it there. Sessions not born in Slack, and
events with no Slack template (GitHub's, the simulator's), post nothing. The lookup, rendering
and Web API call run through `submit` when one is given (the Slack edge's work pool), so a slow
or rate-limited Slack never stalls the scheduler thread that emitted the notice.

    started | held | paused | done | failed | archived | queued
        session_id; the rest (sentence, retry_at, reason, error, output, …) reaches the template.
        done and failed also get `result`, the latest result in full with its facts and links
        (`integrations.latest_result`), split over as many messages as Slack's limits need.
        The thread is Session.source["slack"] = {"channel": C, "thread_ts": TS}, as
        `thread_source(event)` builds it at intake. A `held` notice carries "Make this session
        priority" (action id SESSION_PRIORITY), and so does a `paused` one while the session is
        spot (seed 001, "What a pause does": the pause banner carries the hold banner's button).
    budget_ending
        session_id, label, runs_out_at, resets_at: a window's spot budget runs out soon and the
        session will be paused (`scheduler.pauses.budget_notice`). In its thread, or, for a session asked
        for with /pacer in Slack, by DM to its requester; with "Make this session priority".
    hold_deadlock
        hold_id, armer, held_session_id, waiting_session_id, sentence: a held session and the
        session its hold's armer waits with wait on each other (`scheduler.holds.operator`).
        Posted once per deadlock in the ops channel and in each of the two sessions' threads.
    queue_hold
        hold: the QueueHold (reason, sentence, since, resumes_at, group); resumable: whether
        Resume can work. Posted in the ops channel, with Resume (QUEUE_RESUME) only where it
        can work.

    progress
        session_id: a running turn's agent did something. Its thread gets one message a turn,
        posted once and edited in place after (`integrations.slack.progress`), at most once every
        PROGRESS_SECONDS; when the turn ends (done, failed, paused ...) it is edited once more
        to say so, before that news is posted.

The two action ids are the contract with the listener that runs them (`bot/slack/actions.py`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from slack_sdk import WebClient
from slack_sdk.models.blocks import ActionsBlock, ButtonElement, MarkdownTextObject, SectionBlock
from sqlalchemy import Engine

from integrations.latest_result import read_latest_result
from integrations.slack.messages import thread_messages
from integrations.slack.progress import ProgressMessages
from integrations.spacing import Spacing, StoreBucket
from scheduler.clock import SystemClock
from scheduler.ports import Clock
from scheduler.store.db import session_scope
from scheduler.store.models import Session
from scheduler.store.policy import load_policy
from scheduler.store.session_view import session_view
from scheduler.store.turn_reads import spent_by
from templates import render

log = logging.getLogger("pacer.slack")

SESSION_EVENTS = frozenset({"queued", "held", "started", "paused", "done", "failed", "archived", "budget_ending"})
BUDGET_ENDING = "budget_ending"  # also reaches a requester who asked from Slack outside a thread, by DM
SLACK_SURFACE = "slack"  # Session.source["surface"] of a session asked for with /pacer in Slack
RESULT_STATUSES = frozenset({"done", "failed", "blocked"})  # a finished session's news carries its latest result
QUEUE_HOLD = "queue_hold"
HOLD_DEADLOCK = "hold_deadlock"
QUEUE_RESUME = "pacer.queue_resume"
SESSION_PRIORITY = "pacer.session_priority"

PROGRESS = "progress"  # a running turn's agent did something (`integrations.turn_progress`): spaced
TURN_ENDED = frozenset({"done", "failed", "archived", "paused", "held", "queued"})
# A turn's progress message is edited at most once every PROGRESS_SECONDS, and all of them, from
# every process, together are a bucket (in the database) of PROGRESS_BURST refilled at
# PROGRESS_PER_HOUR (at most 12 edits a minute for one turn, 10 a minute sustained for all): far
# inside chat.update's Tier 3 (50 or more a minute).
PROGRESS_SECONDS = 5.0
PROGRESS_PER_HOUR = 600
PROGRESS_BURST = 20

# Runs `func(*args)` later, off the caller's thread; `what` names the work in a log line.
Submit = Callable[..., object]


def thread_source(event: Mapping[str, Any], workspace_url: str | None = None) -> dict[str, Any]:
    """Where a session born of a Slack message talks back: its channel and the message's thread,
    and the thread's link when the workspace's address is known (`auth.test`'s `url`)."""
    source = {
        "channel": event.get("channel"),
        "thread_ts": event.get("thread_ts") or event.get("ts"),
        "user": event.get("user"),
        "channel_type": event.get("channel_type", "channel"),
    }
    link = thread_link(workspace_url, source["channel"], source["thread_ts"])
    return {**source, "url": link} if link else source


def thread_link(workspace_url: str | None, channel: Any, thread_ts: Any) -> str | None:
    """A message's link as Slack writes it (`chat.getPermalink`, "Copy link"):
    https://<workspace>.slack.com/archives/<channel>/p<ts without its dot>; None when any part is
    missing or not in Slack's form."""
    if not (isinstance(workspace_url, str) and workspace_url.startswith("https://")):
        return None
    if not (isinstance(channel, str) and channel.isalnum() and isinstance(thread_ts, str)):
        return None
    seconds, dot, micros = thread_ts.partition(".")
    if not (seconds.isdigit() and dot and micros.isdigit()):
        return None
    return f"{workspace_url.rstrip('/')}/archives/{channel}/p{seconds}{micros}"


def thread_of(source: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(channel, thread_ts) from a session's `source`, or None when it was not born in Slack."""
    slack = (source or {}).get("slack")
    if not isinstance(slack, Mapping) or not slack.get("channel") or not slack.get("thread_ts"):
        return None
    return str(slack["channel"]), str(slack["thread_ts"])


def dm_of(session: Mapping[str, Any]) -> tuple[str, None] | None:
    """(the requester's user id, no thread) for a session asked for with /pacer in Slack: posting
    to a user id opens the bot's DM with them. None for every other session."""
    source, requester = session.get("source") or {}, session.get("requester")
    if source.get("surface") != SLACK_SURFACE or not isinstance(requester, str) or not requester:
        return None
    return requester, None


class SlackNotifier:
    """Posts session news into the session's thread and queue-hold news into the ops channel."""

    def __init__(
        self, engine: Engine, client: WebClient, *, ops_channel: str | None, submit: Submit | None = None,
        clock: Clock | None = None, progress_seconds: float = PROGRESS_SECONDS,
    ) -> None:
        self._engine = engine
        self._client = client
        self._ops_channel = ops_channel
        self._submit = submit
        self.progress = ProgressMessages(engine, client, clock or SystemClock(), thread_of)
        self._progress: Spacing[int] = Spacing(
            progress_seconds, self._show_progress, name="slack-progress",
            bucket=StoreBucket(engine, "slack-progress", PROGRESS_PER_HOUR, PROGRESS_BURST),  # every process's
        )
        # Sessions whose progress edit waits on the work pool, or runs; asked again while it runs.
        self._waiting: set[int] = set()
        self._running: set[int] = set()
        self._again: set[int] = set()
        self._showing_lock = threading.Lock()

    def close(self) -> None:
        """No more progress edits (the process is stopping); news already asked for still goes."""
        self._progress.close()

    def _show_progress(self, session_id: int) -> None:
        with self._showing_lock:
            if session_id in self._waiting:
                return  # the waiting edit reads the row when it runs: it answers this ask too
            if session_id in self._running:
                self._again.add(session_id)  # it read the row already: asked again, a gap after it ends
                return
            self._waiting.add(session_id)
        try:
            self._later("progress", self._show, session_id)
        except BaseException:  # not submitted (the pool is closing): a later ask may try again
            with self._showing_lock:
                self._waiting.discard(session_id)
            raise

    def _show(self, session_id: int) -> None:
        """The spaced edit, as it runs. The gap counts from its end, not from when it was asked: a
        busy work pool, or a call Slack made wait, must not send the edits asked meanwhile back to
        back."""
        with self._showing_lock:
            self._waiting.discard(session_id)
            self._running.add(session_id)
        try:
            self.progress.show(session_id)
        finally:
            self._progress.mark(session_id)
            with self._showing_lock:
                self._running.discard(session_id)
                again = session_id in self._again
                self._again.discard(session_id)
            if again:
                self._progress.ask(session_id)

    def notify(self, event: str, context: Mapping[str, Any]) -> None:
        if event == PROGRESS and isinstance(context.get("session_id"), int):
            self._progress.ask(int(context["session_id"]))
        elif event in SESSION_EVENTS and context.get("session_id") is not None:
            self._later(f"notice {event}", self.post_session_news, event, dict(context))
        elif event == QUEUE_HOLD:
            self._later(f"notice {event}", self.post_queue_hold, dict(context))
        elif event == HOLD_DEADLOCK:
            self._later(f"notice {event}", self.post_hold_deadlock, dict(context))

    def post_session_news(self, event: str, context: Mapping[str, Any]) -> None:
        if event in TURN_ENDED:  # the turn's progress message says it ended, before its news
            self._progress.drop(int(context["session_id"]))
            try:
                self.progress.close(int(context["session_id"]))
            except Exception:
                log.exception("slack: the progress message of session #%s was not closed", context["session_id"])
        session = self._session(int(context["session_id"]))
        if session is None:
            return
        where = thread_of(session["source"]) or (dm_of(session) if event == BUDGET_ENDING else None)
        if where is None:
            return
        channel, thread_ts = where
        text = render(f"slack/session_{event}.j2", **{**context, "session": session, "result": session["result"]})
        messages = thread_messages(text)  # a long answer in full, over as many messages as it takes
        if event in ("held", BUDGET_ENDING) or (event == "paused" and session["scheduling_class"] == "spot"):
            label = render("slack/label_make_priority.j2")
            button = ButtonElement(text=label, action_id=SESSION_PRIORITY, value=str(session["id"]))
            messages[-1]["blocks"].append(ActionsBlock(elements=[button]).to_dict())
        for message in messages:
            self._client.chat_postMessage(channel=channel, thread_ts=thread_ts, unfurl_links=False, **message)

    def post_queue_hold(self, context: Mapping[str, Any]) -> None:
        if not self._ops_channel:
            log.info("slack: a queue hold is not announced: PACER_OPS_CHANNEL is unset")
            return
        text = render("slack/queue_hold.j2", **context)
        blocks = [SectionBlock(text=MarkdownTextObject(text=text[:3000])).to_dict()]
        if context.get("resumable"):
            button = ButtonElement(text=render("slack/label_resume.j2"), action_id=QUEUE_RESUME, value="resume")
            blocks.append(ActionsBlock(elements=[button]).to_dict())
        self._client.chat_postMessage(channel=self._ops_channel, text=text, blocks=blocks, unfurl_links=False)

    def post_hold_deadlock(self, context: Mapping[str, Any]) -> None:
        """The ops channel, then the held session's thread and the waiting one's (once when they
        are one session holding itself)."""
        text = render("slack/hold_deadlock_notice.j2", **context)
        places: list[tuple[str, str | None]] = [(self._ops_channel, None)] if self._ops_channel else []
        for key in ("held_session_id", "waiting_session_id"):
            session = self._session(int(context[key])) if context.get(key) is not None else None
            where = thread_of(session["source"]) if session is not None else None
            if where is not None and where not in places:
                places.append(where)
        for channel, thread_ts in places:
            self._client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text, unfurl_links=False)

    def _session(self, session_id: int) -> dict[str, Any] | None:
        """The one session view every surface shows (`scheduler.store.session_view`), with where it came
        from and its latest result: a plain snapshot, so rendering never touches a row outside
        its transaction."""
        with session_scope(self._engine) as db:
            row = db.get(Session, session_id)
            if row is None:
                return None
            result = read_latest_result(db, row) if row.status in RESULT_STATUSES else None
            return {
                **session_view(row, load_policy(db), spent_by(db, session_id)),
                "source": dict(row.source or {}),
                "result": result,
            }

    def _later(self, what: str, func: Any, *args: Any) -> None:
        if self._submit is None:
            func(*args)
        else:
            self._submit(what, func, *args)
