"""A failed check or a review on the pull request Pacer opened becomes its session's next turn.

Split at the commit as the rest of intake is (`bot.github.intake`):

  record_feedback(db, event)   in the delivery's transaction: find the session whose branch or
                               pull request it is (the newest not archived; a check on a commit
                               other than the one Pacer pushed last is an older push's, and
                               starts nothing), take the event's key
                               in the delivery ledger, and for a failed check count the attempt
                               against PACER_FIX_BUDGET on the session's row. Returns a
                               `FeedbackPlan`; a redelivery rolls all of it back with its record.
  finish_feedback(pacer, ...)  after the answer: each fix is a turn (gated like any, the class
                               kept); each review is read whole from the API and becomes a human
                               message, as a trusted comment does; a spent budget is said once on
                               the pull request.

Exactly once, whatever the deliveries: a failure is keyed by (session, head commit) under
`pacer:check`, so a redelivered check_run and the check_suite and workflow_run that report the
same failed commit start one turn between them; a review is keyed by its id under
`pacer:review`, so the review and each of its line comments (each a delivery of its own, in no
set order) are one turn, which reads the review and all its lines from the API. The budget's
comment is keyed by the session under `pacer:fix-budget`: said once.

Trust: a check is no one's word, so only where it ran counts (Pacer's branch or pull request); a
review counts only from someone with write access (`author_association`, as comments are judged).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Table, func, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.github.events import TRUSTED_ASSOCIATIONS
from bot.github.feedback import CheckFailed, Feedback, Reviewed
from bot.github.sessions import sessions_of_pull_request
from bot.runtime.adapters import github_clients
from bot.runtime.process import Pacer
from integrations.github.replies import PyGithubReplies, ReplyPort
from integrations.github.reviews import PyGithubReviews, ReviewLine, ReviewPort, ReviewRead
from integrations.github.status import Where
from scheduler.errors import PacerError
from scheduler.front import Context, Session, Status, WebhookDelivery, record_human_message, submit_turn
from templates import render

log = logging.getLogger("pacer.intake")

CHECK_HOOK_ID = "pacer:check"
REVIEW_HOOK_ID = "pacer:review"
BUDGET_HOOK_ID = "pacer:fix-budget"
REVIEW_SURFACE = "github_comment"  # a review is a person speaking on the pull request
_DELIVERIES: Table = WebhookDelivery.__table__  # type: ignore[attr-defined]
_SESSIONS: Table = Session.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class BudgetSpent:
    session_id: int
    where: Where  # the pull request to say it on
    check: str
    budget: int


@dataclass
class FeedbackPlan:
    """What `record_feedback` decided and committed; what `finish_feedback` does afterwards."""

    fixes: list[tuple[int, str]] = field(default_factory=list)  # (session id, the fix turn's prompt)
    reviews: list[tuple[int, Reviewed]] = field(default_factory=list)  # (session id, the review to read and give)
    spent: list[BudgetSpent] = field(default_factory=list)

    @property
    def session_ids(self) -> list[int]:
        return sorted({s for s, _ in self.fixes} | {s for s, _ in self.reviews} | {b.session_id for b in self.spent})

    def __bool__(self) -> bool:
        return bool(self.fixes or self.reviews or self.spent)


def record_feedback(db: DBSession, event: Feedback, *, now: datetime, budget: int) -> FeedbackPlan:
    plan = FeedbackPlan()
    if isinstance(event, Reviewed):
        _review(db, event, now, plan)
    else:
        _check(db, event, now, budget, plan)
    return plan


def _check(db: DBSession, event: CheckFailed, now: datetime, budget: int, plan: FeedbackPlan) -> None:
    by_pull = [s for n in event.pull_requests for s in sessions_of_pull_request(db, event.repository, n)]
    session = _newest(by_pull or sessions_of_branch(db, event.repository, event.head_branch))
    if session is None:
        log.info("github: %s %s failed on %s: not a branch or pull request of a session", event.source, event.name,
                 event.issue_key)
        return
    session_id = session.id or 0
    head = ((session.source or {}).get("workspace") or {}).get("head")
    if not by_pull and not (isinstance(head, str) and head):
        # A fork's pull request lists none, and its branch may be named like Pacer's: by the branch
        # alone only the commit Pacer pushed is Pacer's, and before its first push there is none.
        log.info("github: %s failed at %s on a branch named like session #%s's, before it pushed: not its commit",
                 event.name, event.head_sha[:12], session_id)
        return
    if isinstance(head, str) and head and head.lower() != event.head_sha.lower():
        log.info("github: %s failed at %s, not at %s where session #%s's branch is now: an older push's; nothing new",
                 event.name, event.head_sha[:12], head[:12], session_id)
        return
    if not _first(db, CHECK_HOOK_ID, f"{session_id}:{event.head_sha.lower()}", event.source, now):
        log.info("github: %s at %s was taken already (another delivery or event of the same failure); nothing new",
                 event.name, event.head_sha[:12])
        return
    counted = db.connection().execute(
        update(_SESSIONS)
        .where(_SESSIONS.c.id == session_id, _SESSIONS.c.fix_attempts < budget)
        .values(fix_attempts=_SESSIONS.c.fix_attempts + 1)
        .returning(_SESSIONS.c.fix_attempts)
    ).first()
    if counted is None:
        log.info("github: %s failed on session #%s's pull request; its fix budget of %d is spent", event.name,
                 session_id, budget)
        if _first(db, BUDGET_HOOK_ID, str(session_id), event.source, now):
            plan.spent.append(BudgetSpent(session_id, _where(session, event), event.name, budget))
        return
    attempt = int(counted[0])
    prompt = render("github/fix_check_prompt.j2", check=event, attempt=attempt, budget=budget)
    plan.fixes.append((session_id, prompt))
    log.info("github: %s failed at %s → fix turn %d of %d for session #%s", event.name, event.head_sha[:12], attempt,
             budget, session_id)


def _review(db: DBSession, event: Reviewed, now: datetime, plan: FeedbackPlan) -> None:
    if event.association not in TRUSTED_ASSOCIATIONS:
        log.info("github: a review on %s by %s (%s) is not a message to Pacer: only people with write access speak "
                 "to a session", event.issue_key, event.reviewer, event.association)
        return
    session = _newest(sessions_of_pull_request(db, event.repository, event.number))
    if session is None:
        log.info("github: a review on %s: not a pull request of a session", event.issue_key)
        return
    if not _first(db, REVIEW_HOOK_ID, str(event.review_id), event.source, now):
        log.info("github: review %s on %s was taken already (its review or another of its comments); nothing new",
                 event.review_id, event.issue_key)
        return
    plan.reviews.append((session.id or 0, event))


def sessions_of_branch(db: DBSession, repository: str, branch: str) -> list[Session]:
    """The sessions whose work is on `branch` of `repository` (`source["workspace"]["branch"]`)."""
    if not branch:
        return []
    on = col(Session.source)[("workspace", "branch")].as_string()
    stmt = select(Session).where(func.lower(col(Session.repository)) == repository.lower(), on == branch)
    return list(db.exec(stmt.order_by(col(Session.id))).all())


def _newest(found: Any) -> Session | None:
    live = [s for s in found if s.status != Status.ARCHIVED.value]
    return max(live, key=lambda s: s.id or 0) if live else None


def _where(session: Session, event: CheckFailed) -> Where:
    opened = ((session.source or {}).get("workspace") or {}).get("pull_request") or {}
    number = opened.get("number") if isinstance(opened.get("number"), int) else None
    return Where(event.repository, number or (event.pull_requests[0] if event.pull_requests else 0),
                 event.installation_id)


def _first(db: DBSession, hook_id: str, key: str, event: str, now: datetime) -> bool:
    """Take `key` in the delivery ledger; False when an earlier delivery took it (a conflict waits
    for a racing one to commit, then does nothing)."""
    row = {"hook_id": hook_id, "delivery_id": key, "event": event, "received_at": now}
    upsert = postgresql_insert if db.get_bind().dialect.name == "postgresql" else sqlite_insert
    taken = upsert(_DELIVERIES).values(row).on_conflict_do_nothing().returning(_DELIVERIES.c.id)
    return db.connection().execute(taken).first() is not None


def finish_feedback(
    pacer_or_ctx: Pacer | Context, plan: FeedbackPlan, *, reviews: ReviewPort | None = None,
    replies: ReplyPort | None = None,
) -> None:
    """The slow half: the turns, the reviews read and given, the budget said. Each step stands
    alone; a failure is logged, not spread."""
    ctx = pacer_or_ctx.ctx if isinstance(pacer_or_ctx, Pacer) else pacer_or_ctx
    clients = github_clients(pacer_or_ctx.settings) if isinstance(pacer_or_ctx, Pacer) else None
    if clients is not None:
        reviews = reviews or PyGithubReviews(clients)
        replies = replies or PyGithubReplies(clients)
    for session_id, prompt in plan.fixes:
        guarded(f"fix turn of session #{session_id}", submit_turn, ctx, session_id, prompt, kind="follow_up")
    for session_id, review in plan.reviews:
        guarded(f"review {review.review_id} for session #{session_id}", _give_review, ctx, session_id, review, reviews)
    for spent in plan.spent:
        body = render("github/fix_budget_spent.j2", spent=spent)
        if replies is None:
            log.info("github: session #%s's fix budget is spent; said only in this log: no GITHUB_TOKEN or App",
                     spent.session_id)
            continue
        guarded(f"fix budget of session #{spent.session_id}", replies.reply, spent.where, body)


def _give_review(ctx: Context, session_id: int, review: Reviewed, port: ReviewPort | None) -> None:
    read = _read(review, port)
    if (read.state == "approved" and not read.comments) or not (read.body.strip() or read.comments):
        log.info("github: review %s on %s asks nothing (%s, no comments on lines); no turn", review.review_id,
                 review.issue_key, read.state or "no state")
        return
    text = render("github/review_prompt.j2", reviewer=review.reviewer, state=read.state, body=read.body.strip(),
                  comments=read.comments, pull=review.issue_key)
    record_human_message(ctx, session_id, f"github:{review.reviewer}", text, REVIEW_SURFACE, roster=True)


def _read(review: Reviewed, port: ReviewPort | None) -> ReviewRead:
    """The review whole from the API; without credentials, or should GitHub fail, what the
    delivery carried (the review's body, or its one line comment)."""
    if port is not None:
        try:
            return port.read(Where(review.repository, review.number, review.installation_id),
                             review_id=review.review_id)
        except Exception as exc:
            log.warning("github: review %s on %s could not be read (%s); given as its delivery carried it",
                        review.review_id, review.issue_key, type(exc).__name__)
    lines = (
        (ReviewLine(review.comment.path, review.comment.line, review.comment.body, review.comment.author),)
        if review.comment is not None
        else ()
    )
    return ReviewRead(review.state or "commented", review.body, lines)


def guarded(what: str, func_: Any, *args: Any, **kwargs: Any) -> Any:
    """`func_(*args, **kwargs)`, or None with what went wrong logged: GitHub's follow-up work never
    raises into the delivery that asked for it."""
    try:
        return func_(*args, **kwargs)
    except PacerError as exc:
        log.info("github: %s: %s", what, exc)
    except Exception:
        log.exception("github: %s failed", what)
    return None
