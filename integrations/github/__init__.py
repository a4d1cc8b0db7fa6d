"""Pacer's GitHub edge: webhook verification and the delivery record (`webhook`), payloads read
into typed intake events (`events`, pure), and the sticky status comment written back through
PyGithub off the webhook path (`comments`). Deciding what an event starts is `bot.intake`'s."""
