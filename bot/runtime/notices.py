"""The outbound notifiers a process joins to the scheduler's notifier chain, built where the
process is built (`pacer serve`'s app, `pacer worker`) and never by an inbound route: the issue's
sticky status comment here, the Slack thread, DMs and App Homes through `bot.slack.notices`."""

from __future__ import annotations

import logging

from bot.runtime.adapters import github_comments
from bot.runtime.notify import CompositeNotifier
from bot.runtime.process import Pacer
from integrations.github.comments import CommentPort, StatusComments
from scheduler.ports import Notifier

# Each line keeps the logger of the surface it speaks for.
github_log = logging.getLogger("pacer.github")
slack_log = logging.getLogger("pacer.slack")


def install_status_comments(pacer: Pacer, *, port: CommentPort | None = None) -> StatusComments | None:
    """Add the sticky status comments to the runtime's notifier. Off (with one log line) when no
    GitHub token or App is configured."""
    port = port or github_comments(pacer.settings)
    if port is None:
        github_log.info("github: no GITHUB_TOKEN or GitHub App configured; sticky status comments are off")
        return None
    status = StatusComments(pacer.engine, port, clock=pacer.clock)
    notifier = pacer.ctx.ports.notifier
    if hasattr(notifier, "add"):
        notifier.add(status)
    else:
        pacer.ctx.plugins.listeners.append(status.notify)
    pacer.extras["github_status"] = status
    return status


def install_notifier(pacer: Pacer, notifier: Notifier) -> None:
    """Join the scheduler's notifier chain, replacing one of the same kind an earlier app installed."""
    chain = pacer.ctx.ports.notifier
    if not isinstance(chain, CompositeNotifier):
        slack_log.warning(
            "slack: the scheduler's notifier is %s, not a chain; %s is off",
            type(chain).__name__,
            type(notifier).__name__,
        )
        return
    chain.notifiers = [n for n in chain.notifiers if type(n) is not type(notifier)] + [notifier]
