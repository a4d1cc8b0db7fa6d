"""The hidden markers that begin every comment Pacer writes on GitHub. They tell Pacer's own
comments from people's whoever posted them: with a personal access token Pacer posts as the
token's person, so the login alone cannot.

    STATUS   the sticky status comment (found again by it: `comments.py`)
    REPLY    the answer to a `/pacer <command>` comment (`replies.py`)
"""

from __future__ import annotations

PREFIX = "<!-- pacer:"
STATUS = PREFIX + "status -->"
REPLY = PREFIX + "reply -->"


def is_pacers(body: str) -> bool:
    """Whether a comment's body begins with one of Pacer's markers: a comment Pacer wrote."""
    return body.lstrip().startswith(PREFIX)
