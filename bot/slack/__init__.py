"""Pacer's Slack surface: the Bolt app (`app.py`), one listener module per kind (`commands`,
`events`, `actions`), the App Home (`home`), Socket Mode (`socket`), the HTTP mount
(`http.register`, which also joins the outbound notifier (`integrations/slack/`) to the
scheduler), what a message starts (`intake`) and the Block Kit lists (`blocks`). Nothing here
decides anything: listeners ack, ask `bot.chat.answers`, and post the answer where it belongs."""
