"""Pacer's Slack edge: the Bolt app (`app.py`), one listener module per kind (`commands`,
`events`, `actions`), the App Home (`home`), the notifier, Socket Mode (`socket`) and the HTTP
mount (`http.register`). Nothing here decides anything: listeners ack, ask `bot.chat`, and post
the answer where it belongs."""
