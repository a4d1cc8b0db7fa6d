"""Pacer's outbound Slack adapter: the Web API client (`client`), messages fitted to Slack's
limits (`messages`) and the Notifier that posts a session's news in its thread (`notifier`).
The listeners that receive Slack's requests are the face's: `bot/slack/`."""
