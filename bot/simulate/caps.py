"""What the run's cost caps did (P15 item 1), read from the simulated store before it closes: how
many sessions carried a cap, what they spent, how many were held at their cap at the end, how many
of their turns were halted, and any recorded spend past a cap (a halt lands on the burn estimate,
and a turn's reported cost can come in over it)."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session as DBSession
from sqlmodel import col, func, select

from scheduler.front import COST_CAP_REASON, Session, Turn


def cost_cap_figures(db: DBSession) -> dict[str, Any]:
    capped = {int(sid or 0): (float(cap or 0.0), reason) for sid, cap, reason in db.exec(
        select(Session.id, Session.cost_cap_usd, Session.hold_reason).where(col(Session.cost_cap_usd).is_not(None))
    )}
    spent: dict[int, float] = {}
    halted = 0
    if capped:
        ids = list(capped)
        for sid, total in db.exec(
            select(Turn.session_id, func.sum(Turn.cost_usd))
            .where(col(Turn.session_id).in_(ids))
            .group_by(col(Turn.session_id))
        ):
            spent[int(sid)] = float(total or 0.0)
        halted = int(
            db.exec(
                select(func.count()).select_from(Turn).where(col(Turn.session_id).in_(ids), Turn.status == "halted")
            ).one()
        )
    return {
        "capped_sessions": len(capped),
        "capped_spent_usd": round(sum(spent.values()), 2),
        "held_at_cap": sum(1 for _cap, reason in capped.values() if reason == COST_CAP_REASON),
        "halted_turns": halted,
        "over_cap_usd": round(sum(max(spent.get(sid, 0.0) - cap, 0.0) for sid, (cap, _r) in capped.items()), 2),
    }
