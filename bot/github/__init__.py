"""Pacer's GitHub surface: the webhook route, its verification and the delivery record
(`webhook`), and payloads read into typed intake events (`events`, pure). Deciding what an event
starts is `bot.github.intake`'s; the sticky status comment goes back through
`integrations/github/`."""
