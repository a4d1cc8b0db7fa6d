"""Pacer's Slack surface: the Bolt app (`app.py`), one listener module per kind (`commands`,
`events`, `actions`), the App Home (`home`), Socket Mode (`socket`) and the HTTP mount
(`http.register`), which also joins the outbound notifier (`integrations/slack/`) to the
scheduler. Nothing here decides anything: listeners ack, ask `bot.chat`, and post the answer
where it belongs."""
