"""Pacer's Slack surface: the Bolt app (`app.py`), one listener module per kind (`commands`,
`events`, `actions`), the App Home (`home`), Socket Mode (`socket`), the HTTP mount (`http`), what
a message starts (`intake`) and the Block Kit lists (`blocks`); and what Pacer says on Slack
unasked (`notices`: the thread notifier of `integrations/slack/` and the App Home refresher),
which the process joins to the scheduler where it is built. Nothing here decides anything:
listeners ack, ask `bot.chat.answers`, and post the answer where it belongs."""
