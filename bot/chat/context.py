"""What a command handler is given (`Context`, or `StoreContext` with an open transaction) and
what it gives back (`Answer`).

A store handler runs inside the one transaction `bot.chat.answers` opens; an engine handler runs after it
closes, because the turn engine opens its own transactions (and on SQLite a second writer would
wait on the first). Either returns a template name plus plain values, rendered in the asking
surface's flavour once everything has committed, so Slack, the console and the API say the same
sentence from the same template.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session as DBSession

from bot.chat.roles import Role
from bot.runtime.process import Pacer
from integrations.slack.messages import GATE_CARD_BLOCKS

# Surface -> the name a policy audit line records it under.
AUDIT_SURFACES = {"slack": "slack:/pacer", "slack_home": "slack:home", "console": "console", "api": "api"}
MESSAGE_BLOCK_LIMIT = 50
HOME_BLOCK_LIMIT = 100
HOME_QUEUE_BLOCK_LIMIT = HOME_BLOCK_LIMIT - GATE_CARD_BLOCKS  # the gate card sits above the queue


@dataclass
class Context:
    pacer: Pacer
    actor: str
    role: Role | None
    surface: str
    now: datetime

    @property
    def flavour(self) -> str:
        """The flavour `templates/chat/` speaks in on this surface: Slack mrkdwn or plain text."""
        return "slack" if self.surface.startswith("slack") else "text"

    @property
    def block_limit(self) -> int:
        return HOME_QUEUE_BLOCK_LIMIT if self.surface == "slack_home" else MESSAGE_BLOCK_LIMIT

    @property
    def audit_surface(self) -> str:
        return AUDIT_SURFACES.get(self.surface, self.surface)


@dataclass(frozen=True)
class Answer:
    """A handler's result. `template` is a stem under `templates/chat/`; `values` must be
    plain data (they are rendered after the commit). `start_now` names sessions a promotion
    moved to priority, handed to the start-now hook once the change is committed."""

    template: str
    values: Mapping[str, Any] = field(default_factory=dict)
    in_channel: bool = False
    blocks: list[dict[str, Any]] | None = None
    start_now: tuple[int, ...] = ()
    reordered: bool = False  # the queue's order changed: `queue_reordered` is emitted once it is committed


@dataclass
class StoreContext(Context):
    db: DBSession


StoreHandler = Callable[[StoreContext, Any], Answer]
EngineHandler = Callable[[Context, Any], Answer]
