"""Pacer's outbound GitHub adapter: the sticky status comment, read from a session's row
(`status`) and written back through PyGithub off the webhook path (`comments`). The webhook that
receives GitHub's deliveries is the face's: `bot/github/`."""
