"""A session as every surface shows it: one plain dict, read from the row and the policy, that
the REST API, the Slack and console answers and the ao_event templates all start from, so no
two of them can name or resolve a field differently."""

from __future__ import annotations

from typing import Any

from scheduler.rules.snapshot import PolicyView
from scheduler.store.models import Session
from scheduler.store.sessions import class_of


def class_source(session: Session) -> str:
    """Which of the three sources decided the class (seed 001, "Where the class comes from")."""
    if session.scheduling_class is None:
        return "genesis"
    return "trigger" if session.class_from_trigger else "session"


def session_view(session: Session, policy: PolicyView, spent_usd: float) -> dict[str, Any]:
    """`spent_usd`: the session's spend so far (`turn_reads.spent_by`), shown beside its cap."""
    return {
        "id": session.id,
        "title": session.title,
        "status": session.status,
        "genesis": session.genesis,
        "scheduling_class": class_of(session, policy).value,
        "class_source": class_source(session),
        "precedence": session.precedence,
        "trigger_id": session.trigger_id,
        "parent_session_id": session.parent_id,
        "forked_from": session.forked_from_id,
        "runtime": session.runtime,
        "weight": session.weight,
        "capacity": session.capacity,
        "capacity_multiplier": session.capacity_multiplier,
        "cost_cap_usd": session.cost_cap_usd,
        "spent_usd": round(spent_usd, 4),
        "concurrency_group": session.concurrency_group,
        "requester": session.requester,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "started_at": session.started_at,
        "finished_at": session.finished_at,
    }
