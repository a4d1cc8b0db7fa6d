"""What Pacer says on Slack by itself, unasked: a session's thread and DMs (the notifier of
`integrations.slack.notifier`) and the App Homes people have open (`home_refresh`). Built where
the process is built — `pacer serve`'s app on the Slack edge's client and work pool, `pacer
worker` on a client and pool of its own — and joined to the scheduler's notifier chain."""

from __future__ import annotations

from dataclasses import dataclass

from slack_sdk import WebClient

from bot.runtime.notices import install_notifier
from bot.runtime.process import Pacer
from bot.slack.home import publish_home
from bot.slack.home_refresh import HomeRefresher
from integrations.slack.notifier import SlackNotifier, Submit


@dataclass
class SlackNotices:
    notifier: SlackNotifier
    home: HomeRefresher

    def close(self) -> None:
        self.notifier.close()
        self.home.close()


def install_slack_notices(pacer: Pacer, client: WebClient, submit: Submit) -> SlackNotices:
    """Build the thread notifier (posting through `submit`) and the App Home refresher on
    `client`, and add both to the scheduler's notifier chain."""
    notifier = SlackNotifier(
        pacer.engine, client, ops_channel=pacer.settings.ops_channel, submit=submit, clock=pacer.clock
    )
    home = HomeRefresher(pacer, lambda user: publish_home(pacer, client, user))
    install_notifier(pacer, notifier)
    install_notifier(pacer, home)
    return SlackNotices(notifier=notifier, home=home)
