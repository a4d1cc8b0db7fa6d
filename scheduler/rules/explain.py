"""The two sentences every surface renders for a Decision: why it is held, and held until —
a condition, with the rollover only as an upper bound (seed 001, "Held until is a condition")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from scheduler.rules.gate import Ceiling, Decision, Reason
from templates import render


@dataclass(frozen=True)
class Explanation:
    why: str
    until: str

    def sentence(self) -> str:
        return f"{self.why} {self.until}".strip()


def _threshold(decision: Decision) -> float | None:
    """The fleet burn that would admit this session: sustainable rate less its own burn, over
    the windows ahead of their curve (the strictest wins). None in fraction mode."""
    rates = [
        w.sustainable_rate - decision.own_burn
        for w in decision.windows
        if w.name in decision.paced_windows and w.calibrated and w.sustainable_rate is not None
    ]
    return min(rates) if rates else None


def explain(decision: Decision, now: datetime) -> Explanation:
    ctx = dict(
        d=decision,
        now=now,
        threshold=_threshold(decision),
        spent=[w for w in decision.windows if w.name in decision.budget_spent_windows],
        paced=[w for w in decision.windows if w.name in decision.paced_windows],
        Ceiling=Ceiling,
        Reason=Reason,
    )
    return Explanation(render("text/gate_why.j2", **ctx), render("text/gate_until.j2", **ctx))
