"""The gate card as the bot shows it: read the quota, then build the one card
(`scheduler.steering.gate_card`) for the runtime a new spot session would run on.

`/pacer policy` on every surface and the App Home read the card through here, and
GET /api/v1/policy builds it from the same builder, so none of them can disagree.
"""

from __future__ import annotations

from datetime import datetime

from bot.config.settings import Settings
from bot.runtime.process import Pacer
from scheduler.front import GateCard, build_card, read_quota


def spot_runtime(settings: Settings) -> str:
    """The runtime `/pacer new --spot` would give a session: the one the card asks about."""
    return "echo" if settings.runner == "echo" else str(settings.runtime_name)


def current_card(pacer: Pacer, now: datetime) -> GateCard:
    """The card now. The quota is read before the transaction opens: a source may open its own."""
    reading = read_quota(pacer.ctx, now)
    with pacer.db() as db:
        return build_card(db, pacer.ctx, reading, now, runtime=spot_runtime(pacer.settings))
