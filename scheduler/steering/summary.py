"""A status summary: Pacer's own bookkeeping (seed 001, "A status-summary fork is refused, never
queued"). `/pacer summary <id>` asks for a short blurb about another session; it is written by a
bookkeeping session forked from it, which runs one turn and is done.

The gate is asked before the fork is made: the fork that would be created is put to every check
beyond the gate (an operator hold on all, on spot, on its genesis …) and to the gate itself, as a
spot session of default precedence — never the source's class or its +1 (seed 001, "A spawn lands
just above its parent", its one exception) — inside the transaction that would create it. While
admission would say no, no session is created at all and the blurb still arrives, from the path
that spends no slot: a digest of the source's own record. When it would say yes, the fork is
created through the one door every session takes (`create_session`, then `submit_turn`); if the
fleet filled between the two, admission refuses it (`engine/admit.py: refuse_bookkeeping`):
archived, never held, no re-check.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session as DBSession
from sqlmodel import col, select

from scheduler.context import Context
from scheduler.engine.fleet import read_quota
from scheduler.engine.turns import submit_turn
from scheduler.engine.verdict import Verdict, new_spot_asking, verdict_now
from scheduler.errors import InvalidInput
from scheduler.rules.explain import explain
from scheduler.rules.waiting import waiting_reason
from scheduler.store.db import deciding_scope
from scheduler.store.models import Session, Turn
from scheduler.store.policy import load_policy
from scheduler.store.sessions import NewSession, create_session, get_session, is_spot, new_row
from templates import error_text, render

log = logging.getLogger("pacer.summary")

RESULT_CHARS = 2000  # of the source's latest result, in the prompt and the digest


@dataclass(frozen=True)
class Summary:
    outcome: str  # forked | refused
    source_id: int
    session_id: int | None  # the bookkeeping session, when one was created
    sentence: str  # why it was refused, or what its turn did
    digest: str = ""  # the blurb written without a slot, when refused


def summarize(ctx: Context, source_id: int, *, actor: str | None = None, surface: str | None = None) -> Summary:
    """Fork a bookkeeping session to summarize `source_id`, asking admission first; refused, the
    digest of the source's record instead. Unknown or bookkeeping sources are refused with a
    clear error and change nothing."""
    now = ctx.clock.now()
    reading = read_quota(ctx, now)
    with deciding_scope(ctx.engine) as db:  # the answer and the fork it allows are one decision
        source = get_session(db, source_id)
        if source.bookkeeping:
            raise InvalidInput(error_text("summary/of_bookkeeping", session_id=source_id), field="id")
        request = NewSession(
            title=f"Summary of #{source_id}"[:200],
            scheduling_class="spot",
            forked_from_id=source_id,
            bookkeeping=True,
            runtime=source.runtime,
            requester=actor,
            source={"surface": surface, "summary_of": source_id} if surface else {"summary_of": source_id},
        )
        probe = Session(**new_row(db, request, now=now))
        said = verdict_now(db, ctx, probe, new_spot_asking(ctx, source.runtime), reading, now)
        latest = _latest_output(db, source_id)
        policy = load_policy(db)
        headline = waiting_reason(source, now, spot=is_spot(source, policy)).headline
        digest = render("text/summary_digest.j2", source=source, headline=headline, latest=latest)
        if not said.allowed:
            sentence = _refusal(said, now)
            log.info("summary of #%s refused before the fork: %s", source_id, sentence)
            return Summary("refused", source_id, None, sentence, digest)
        fork = create_session(db, request, now=now)
        fork.prompt = render("text/summary_prompt.j2", source=source, headline=headline, latest=latest)
        db.add(fork)
        db.flush()
        fork_id, prompt = fork.id or 0, fork.prompt
    submission = submit_turn(ctx, fork_id, prompt, kind="first")
    if submission.outcome == "refused":  # the fleet filled between the question and the fork
        return Summary("refused", source_id, fork_id, submission.sentence, digest)
    return Summary("forked", source_id, fork_id, submission.sentence)


def _refusal(said: Verdict, now: datetime) -> str:
    """What said no: the check beyond the gate that holds it, else the gate's own reason."""
    block = said.asleep or said.block
    if block is not None or said.decision is None:
        return block.sentence if block is not None else ""
    return explain(said.decision, now).why


def _latest_output(db: DBSession, source_id: int) -> str:
    stmt = (
        select(Turn.output)
        .where(Turn.session_id == source_id, col(Turn.finished_at).is_not(None))
        .order_by(col(Turn.finished_at).desc(), col(Turn.id).desc())
        .limit(1)
    )
    found = db.exec(stmt).first()
    return (found or "")[-RESULT_CHARS:]
