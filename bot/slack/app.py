"""The composition root of the Slack edge: one Bolt app, its Web API client and its listeners.

Sync Bolt, not AsyncApp. Everything a listener calls — `bot.chat.answers.answer`, SQLModel sessions, the
scheduler — is synchronous, and the built-in Socket Mode handler is synchronous and needs no extra
dependency, so one style runs end to end. `App.dispatch` blocks, so the ASGI side runs it in a
thread pool (`bot/slack/http.py`), never on the event loop.

`process_before_response=True`: every listener here only acks and hands its work to the edge's
pool (microseconds), so Bolt runs it inline on the dispatching thread and answers as soon as it
returns. The default (False) would run it on Bolt's executor and poll for the ack every 10 ms —
a thread hop and a 10 ms floor on every ack, for nothing.
"""

from __future__ import annotations

import logging

from slack_bolt import App, BoltResponse
from slack_bolt.error import BoltError
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped

from bot.runtime.process import Pacer
from bot.slack import actions, commands, events
from bot.slack.edge import SlackEdge
from integrations.slack.client import web_client
from scheduler.errors import ConfigError
from templates import error_text, render

log = logging.getLogger("pacer.slack")


class _TokenInClient(logging.Filter):
    """Bolt reads SLACK_BOT_TOKEN from the environment by itself and, given the client built from
    that same token, warns on every start that the token goes unused; the client carries it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


logging.getLogger("slack_bolt.App").addFilter(_TokenInClient())


def build_bolt_app(pacer: Pacer, *, edge: SlackEdge | None = None, verify_token: bool = True) -> App:
    """The Bolt app with every Pacer listener registered.

    `verify_token=False` skips the start-up `auth.test` (Bolt then calls it on the first request);
    with it on, a token Slack refuses stops start-up with a ConfigError naming SLACK_BOT_TOKEN.
    Request signature verification is always on. Listeners run on `edge.listeners`.
    """
    settings = pacer.settings
    edge = edge or SlackEdge(pacer)
    if not settings.slack_signing_secret and not settings.slack_app_token:
        raise ConfigError(error_text("slack/signing_secret_missing"))
    if not settings.slack_bot_token:
        raise ConfigError(error_text("slack/bot_token_missing"))
    try:
        app = App(
            signing_secret=settings.slack_signing_secret or "",  # Socket Mode only: no HTTP route takes requests
            client=web_client(token=settings.slack_bot_token, base_url=settings.slack_api_url),
            token_verification_enabled=verify_token,
            request_verification_enabled=True,
            process_before_response=True,
            listener_executor=edge.listeners,
            name="pacer",
        )
    except BoltError as exc:
        raise ConfigError(error_text("slack/token_refused", code=_reason(exc))) from None
    except OSError as exc:  # unreachable Web API: say where we looked, never with the token
        raise ConfigError(
            error_text("slack/api_unreachable", url=settings.slack_api_url, problem=type(exc).__name__)
        ) from None
    commands.register(app, edge)
    events.register(app, edge)
    actions.register(app, edge)
    app.error(on_error)
    return app


# What Bolt raises reading a payload that is not shaped as Slack shapes it: `actions` a string,
# `event` a list, a field missing. Its matchers, its middleware and its argument injection all
# index the payload directly, and Pacer's listeners only ack and hand the work on.
UNREADABLE = (AttributeError, TypeError, KeyError, IndexError, ValueError)


def on_error(error: Exception) -> BoltResponse:
    """Bolt's error handler: a payload it could not read is a 400, anything else a logged 500."""
    if isinstance(error, UNREADABLE):
        log.warning("slack: a signed request Bolt could not read (%s: %s); answered 400", type(error).__name__, error)
        return BoltResponse(status=400, body=render("slack/request_malformed.j2"))
    log.error("slack: a listener failed", exc_info=error)
    return BoltResponse(status=500, body="")


def _reason(exc: BoltError) -> str | None:
    # Bolt's message embeds the API response; keep only Slack's error code, never the token.
    text = str(exc)
    for code in ("invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"):
        if code in text:
            return code
    return None
