"""GitHub intake: an issue or pull-request event becomes a genesis-tagged session, or steers one.

Work is split at the commit, so the webhook can make its promise ("each session exactly once, none
lost") before it answers:

  record_github(db, event)   in the caller's transaction, next to the delivery record: match
                             triggers, create each session with its rendered prompt, record its
                             prerequisites (`scheduler.holds.prerequisites`), change a class for
                             `pacer:priority`, place or lift the hold of `pacer:hold` and `/hold`
                             (`scheduler.holds.operator`). Returns a `GithubPlan`. Fast: a few
                             row writes.
  finish_github(ctx, plan)   after the commit, off the request (`bot.github.plan`): announce the
                             holds, submit each first turn, StartNow for promotions, stop a closed
                             issue's (or pull request's) sessions and those whose trigger label
                             was removed (a running turn halted, the session archived), and
                             record the issue's state for the prerequisites that name it. A
                             burst's plans are finished together (`finish_github_plans`).
  github_event(ctx, event)   both in one go, for callers that are not the webhook.

A comment by someone with write access on a session's issue, or on the pull request Pacer opened
for it, is a human message on that session (`bot.github.sessions.comment_session`), delivered in
`finish_github` as a Slack thread reply is: the session's next turn, and a jump in the spot queue.
Prow's `/hold` and `/hold cancel` lines place and lift the same hold the `pacer:hold` label does.

Steering applies in delivery order per issue. Every delivery first takes its issue's steering
lock (`scheduler.store.db.steer_in_turn`), and a hold is written or ended in the delivery's own
transaction, so a `/hold` and a `/hold cancel` 20 ms apart end lifted: the cancel's transaction
waits for the hold's and then reads it. The order lives in the database, not in a process, so
it holds with several `pacer serve` on one PostgreSQL, each taking one of the two deliveries;
follow-ups serialised per issue inside one process would not be ordered against a delivery
another process took. The follow-up (`finish_github`) only announces what was decided.

A crash between the two loses nothing: a committed session with a prompt and no turn gets its
first turn from `scheduler.engine.lifecycle.recover` at the next start.

A session exists at most once per (trigger, repository, number), whatever the delivery ids: the
session is written with an intake key, a row in the delivery ledger (`webhook_deliveries`,
unique on (hook_id, delivery_id)) under Pacer's own hook id `pacer:intake` and the id
`<trigger id>:<owner/name#12>`. A second event for the same issue finds the key by its unique
index — one seek, however many sessions exist — and the constraint is the backstop should two
transactions race (the matching trigger rows are locked first on PostgreSQL; SQLite's writes
are serial anyway). A comment is taken once the same way, by its id under `pacer:comment`: the
same comment delivered under several delivery ids (several hooks, an App and a repository
webhook) is one message, one command, one hold. GitHub's hook ids are numbers, so Pacer's kinds
of row cannot collide with theirs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Table, bindparam, insert
from sqlalchemy import select as core_select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.github.commands import command_text, comment_command
from bot.github.events import (
    HOLD_LABEL,
    PRIORITY_LABEL,
    Control,
    IntakeEvent,
    Kind,
    cost_cap_of,
    is_trusted,
    who_acted,
)
from bot.github.matching import (
    DEFAULT_TRIGGER_LABEL,
    github_facts,
    github_source,
    github_trigger_mismatch,
    trusted_associations,
)
from bot.github.plan import GithubPlan, finish_github
from bot.github.sessions import comment_session, sessions_of_issue, sessions_of_pull_request
from integrations.github.status import Where
from scheduler.bounds import clean_text
from scheduler.errors import InvalidInput
from scheduler.front import (
    ACTIVE_STATUSES,
    Context,
    NewOperatorHold,
    NewSession,
    OperatorHold,
    Session,
    Status,
    Trigger,
    WebhookDelivery,
    add_hold,
    change_class,
    end_hold,
    insert_session,
    parse_prerequisites,
    record_prerequisites,
    render_trigger_prompt,
    repository_group,
    session_scope,
    steer_in_turn,
)
from templates import render

log = logging.getLogger("pacer.intake")

GITHUB_ACTOR_PREFIX = "github:"
INTAKE_HOOK_ID = "pacer:intake"
COMMENT_HOOK_ID = "pacer:comment"
STEER_HOOK_PREFIX = "pacer:steer:"  # + the issue key: the `/hold` and `/hold cancel` comments applied to it
ACTIVE = frozenset(s.value for s in ACTIVE_STATUSES)

# Built once: every delivery runs these, and building a statement costs more than running it.
# The ledger and session writes are Core statements on the tables: a delivery needs no ORM
# object, and the ORM's unit of work costs more than the rows it writes (issue #6).
_DELIVERIES: Table = WebhookDelivery.__table__  # type: ignore[attr-defined]
_TRIGGERS = (
    select(Trigger)
    .where(Trigger.kind == bindparam("kind"), col(Trigger.enabled).is_(True))
    .order_by(col(Trigger.id))
    .with_for_update()
)
_TAKEN = core_select(_DELIVERIES.c.id).where(
    _DELIVERIES.c.hook_id == bindparam("hook_id"), _DELIVERIES.c.delivery_id == bindparam("key")
)
_KEY = insert(_DELIVERIES)


@dataclass(frozen=True)
class IntakeSettings:
    """What intake needs from the settings: the runtime new sessions use, the prompt bound, the fix budget."""

    runtime: str = "echo"
    max_prompt_chars: int = 100_000
    fix_budget: int = 3  # PACER_FIX_BUDGET: fix turns per session for failed checks (bot.github.fixes)

    @classmethod
    def from_settings(cls, settings: Any) -> IntakeSettings:
        runtime = "echo" if settings.runner == "echo" else settings.runtime_name
        return cls(runtime=runtime, max_prompt_chars=settings.max_prompt_chars, fix_budget=settings.fix_budget)


def github_event(pacer_or_ctx: Any, event: IntakeEvent, *, settings: IntakeSettings | None = None) -> list[int]:
    """Record and finish one GitHub event in one go. Returns the ids of the sessions it created."""
    ctx: Context = getattr(pacer_or_ctx, "ctx", pacer_or_ctx)
    if settings is None and hasattr(pacer_or_ctx, "settings"):
        settings = IntakeSettings.from_settings(pacer_or_ctx.settings)
    with session_scope(ctx.engine) as db:
        plan = record_github(db, event, now=ctx.clock.now(), settings=settings or IntakeSettings())
    finish_github(pacer_or_ctx, plan)
    return plan.created_ids


def record_github(db: DBSession, event: IntakeEvent, *, now: datetime, settings: IntakeSettings) -> GithubPlan:
    plan = GithubPlan(actor=f"{GITHUB_ACTOR_PREFIX}{event.actor}", issue=event.issue_key)
    steer_in_turn(db, event.issue_key.lower())  # before any read: this issue's earlier deliveries are committed
    if event.comment_id is not None and not _first_of_comment(db, event.comment_id, now):
        log.info(
            "github: comment %s on %s was taken already, under another delivery; nothing new",
            event.comment_id,
            event.issue_key,
        )
        return plan
    if event.kind is Kind.CONTROL:
        _control(db, event, now, plan)
        return plan
    if event.kind is Kind.COMMENT:
        if command_text(event.comment or "") is not None:  # `/pacer <command>`: run as its author, if they may
            plan.commands.extend(c for c in [comment_command(event, plan.actor)] if c is not None)
            return plan
        session_id = comment_session(db, event)
        if session_id is not None:
            plan.messages.append((session_id, event.comment or ""))
            plan.comment_where = Where(event.repository, event.number, event.installation_id)  # for its answer
        return plan
    for trigger in db.exec(_TRIGGERS, params={"kind": event.kind.value}).all():
        mismatch = github_trigger_mismatch(trigger.kind, trigger.config or {}, event)
        if mismatch is not None:
            log.debug("github: trigger %r skips %s: %s", trigger.name, event.issue_key, mismatch)
            continue
        if not is_trusted(event, trusted_associations(trigger.config or {})):
            login, association = who_acted(event)
            log.info(
                "github: %s %s by %s (%s) ignored for trigger %r: "
                "only authors and labelers with write access start work",
                event.issue_key,
                event.action,
                login,
                association,
                trigger.name,
            )
            continue
        if taken(db, trigger.id or 0, event.issue_key):
            log.info("github: %s already has a session from trigger %r; nothing new", event.issue_key, trigger.name)
            continue
        created = _create(db, trigger, event, now, settings)
        if created is not None:
            plan.created.append(created)
            if HOLD_LABEL in {label.lower() for label in event.labels}:
                _hold(db, plan, created[0], now, command=False)
    return plan


def _create(
    db: DBSession, trigger: Trigger, event: IntakeEvent, now: datetime, settings: IntakeSettings
) -> tuple[int, str] | None:
    try:
        prompt = render_trigger_prompt(trigger, github_facts(event))
    except InvalidInput as exc:
        log.warning("github: %s starts nothing: %s", event.issue_key, exc)
        return None
    if not prompt:
        log.warning(
            "github: trigger %r rendered an empty prompt for %s; nothing started", trigger.name, event.issue_key
        )
        return None
    prompt = clean_text(prompt)  # the facts are clean; a template's own escapes may not be
    if len(prompt) > settings.max_prompt_chars:
        log.warning("github: the prompt for %s is %d characters; cut to PACER_MAX_PROMPT_CHARS=%d",
                    event.issue_key, len(prompt), settings.max_prompt_chars)
        prompt = prompt[: settings.max_prompt_chars]
    labels = {label.lower() for label in event.labels}
    request = NewSession(
        title=f"{event.issue_key} {event.title}".strip()[:200],
        genesis=trigger.kind,
        # A control label already on the issue counts from the start; only people GitHub lets
        # label can have put it there.
        scheduling_class="priority" if PRIORITY_LABEL in labels else None,
        cost_cap_usd=cost_cap_of(labels),  # else the trigger's default
        trigger_id=trigger.id,
        runtime=settings.runtime,
        concurrency_group=trigger.concurrency_group or repository_group(event.repository),
        requester=f"{GITHUB_ACTOR_PREFIX}{event.actor}",
        source=github_source(event, trigger),
        repository=event.repository,
    )
    session_id = insert_session(db, request, now=now, prompt=prompt, trigger=trigger)
    db.connection().execute(
        _KEY,
        {
            "hook_id": INTAKE_HOOK_ID,
            "delivery_id": intake_key(trigger.id or 0, event.issue_key),
            "event": f"session:{session_id}",
            "received_at": now,
        },
    )
    declared = f"{event.title}\n{event.body}"
    if parse_prerequisites(declared):  # most issues declare none: spare the request two queries
        session = db.get(Session, session_id)
        if session is not None:
            record_prerequisites(db, session, declared)
    log.info("github: %s %s → session #%s (trigger %r)", event.issue_key, event.action, session_id, trigger.name)
    return session_id, prompt


def _control(db: DBSession, event: IntakeEvent, now: datetime, plan: GithubPlan) -> None:
    if not is_trusted(event):
        login, association = who_acted(event)
        log.info("github: %s on %s by %s (%s) ignored: only people with write access steer work",
                 event.label, event.issue_key, login, association)
        return
    if (
        event.control in (Control.HOLD, Control.RELEASE)
        and event.comment_id is not None
        and _superseded(db, event, now)
    ):
        log.info("github: %s on %s by comment %s is older than a steering comment already applied; nothing changes",
                 event.control.value, event.issue_key, event.comment_id)
        return
    if event.control in (Control.CLOSE, Control.REOPEN):
        plan.issue_state = "closed" if event.control is Control.CLOSE else "open"
    if event.control in (Control.CLOSE, Control.UNLABEL):
        _stop(db, event, plan)
        return
    sessions = [s for s in sessions_of_issue(db, event.issue_key) if s.status in ACTIVE]
    for session in sessions:
        session_id = session.id or 0
        if event.control is Control.PRIORITY:
            before, _after = change_class(db, session, "priority", now=now)
            plan.promoted.append(session_id)
            if session.status == Status.WAITING.value:
                plan.start_now.append(session_id)
            log.info("github: %s made session #%s priority (was %s)", event.actor, session_id, before.value)
        elif event.control is Control.HOLD:
            if db.exec(_label_holds(session_id)).first() is None:  # one hold, however often labelled
                _hold(db, plan, session_id, now, command=event.comment is not None)
        elif event.control is Control.RELEASE:
            # The label armed it, so whoever may remove the label (write access, checked) ends it.
            holds = db.exec(_label_holds(session_id)).all()
            for hold in holds:
                end_hold(db, hold, now, plan.actor, plan.after_commit)
                plan.holds_lifted.append(hold.id or 0)
            if holds:
                plan.released.append(session_id)
                plan.after_commit.queue_pass = True  # the held session may start now
        elif event.control is Control.CAP:
            plan.caps.append((session_id, cost_cap_of([event.label or ""]) or 0.0))
    if not sessions and event.control is not Control.REOPEN:
        log.info("github: %s on %s: no session of that issue is active", event.control, event.issue_key)


def _stop(db: DBSession, event: IntakeEvent, plan: GithubPlan) -> None:
    """Closed: every active session of the issue, and of the pull request when Pacer opened it,
    stops (its running turn halted, then archived). Unlabeled: those a github_label trigger
    started with the label removed."""
    found = [*sessions_of_issue(db, event.issue_key)]
    if event.control is Control.CLOSE and event.is_pull_request:
        found += sessions_of_pull_request(db, event.repository, event.number)
    if event.control is Control.UNLABEL:
        removed = (event.label or "").lower()
        found = [s for s in found if _trigger_label(db, s) == removed]
        plan.stop_why, plan.stop_label = "unlabeled", event.label
    ids = sorted({s.id or 0 for s in found if s.status in ACTIVE})
    plan.archive.extend(ids)
    if ids:
        log.info("github: %s %s by %s stops session(s) %s", event.issue_key, event.action, event.actor,
                 ", ".join(f"#{i}" for i in ids))


def _trigger_label(db: DBSession, session: Session) -> str | None:
    """The label whose adding started this session: its github_label trigger's `label`."""
    if session.genesis != Kind.GITHUB_LABEL.value or session.trigger_id is None:
        return None
    trigger = db.get(Trigger, session.trigger_id)
    config = (trigger.config or {}) if trigger is not None else {}
    return str(config.get("label") or DEFAULT_TRIGGER_LABEL).lower()


def _hold(db: DBSession, plan: GithubPlan, session_id: int, now: datetime, *, command: bool) -> None:
    """The hold of `pacer:hold` or `/hold`, written beside the delivery that asks for it."""
    reason = render("text/github_hold_reason.j2", label=HOLD_LABEL, issue=plan.issue, actor=plan.actor, command=command)
    hold = add_hold(db, NewOperatorHold("session", [str(session_id)], plan.actor, reason), now)
    plan.holds_placed.append((session_id, hold.id or 0))


def intake_key(trigger_id: int, issue_key: str) -> str:
    """The delivery-ledger id that says this trigger has taken this issue. Whole, never cut: an
    issue key is at most 151 characters (`bounds.MAX_REPOSITORY_CHARS` and `#` and ten digits),
    and the column has no length."""
    return f"{trigger_id}:{issue_key.lower()}"


def _first_of_comment(db: DBSession, comment_id: int, now: datetime) -> bool:
    """Take a comment's key in the delivery ledger; False when an earlier delivery of the same
    comment took it (a conflict waits for a racing one to commit, then does nothing)."""
    row = {"hook_id": COMMENT_HOOK_ID, "delivery_id": str(comment_id), "event": "issue_comment", "received_at": now}
    upsert = postgresql_insert if db.get_bind().dialect.name == "postgresql" else sqlite_insert
    taken = upsert(_DELIVERIES).values(row).on_conflict_do_nothing().returning(_DELIVERIES.c.id)
    return db.connection().execute(taken).first() is not None


def _superseded(db: DBSession, event: IntakeEvent, now: datetime) -> bool:
    """Whether a later `/hold` or `/hold cancel` on this issue was applied before this one.

    The steering lock orders the deliveries that reach the database, but two replicas (or one
    slow request) can hand it a `/hold cancel` before the `/hold` it cancels. GitHub numbers
    comments in the order they are written, so the comment with the higher id is the person's
    last word: each steering comment is written in the ledger under its issue, and one that
    arrives after a later one changes nothing (the later one already said what should be)."""
    hook_id = f"{STEER_HOOK_PREFIX}{event.issue_key.lower()}"
    mine = f"{event.comment_id:020d}"  # fixed width: text order is number order under any collation
    later = (
        core_select(_DELIVERIES.c.id).where(_DELIVERIES.c.hook_id == hook_id, _DELIVERIES.c.delivery_id > mine).limit(1)
    )
    superseded = db.connection().execute(later).first() is not None
    db.connection().execute(
        _KEY.values(
            hook_id=hook_id, delivery_id=mine, event=event.control.value if event.control else "", received_at=now
        )
    )
    return superseded


def taken(db: DBSession, trigger_id: int, issue_key: str) -> bool:
    found = (
        db.connection().execute(_TAKEN, {"hook_id": INTAKE_HOOK_ID, "key": intake_key(trigger_id, issue_key)}).first()
    )
    return found is not None


def _label_holds(session_id: int) -> Any:
    """The open holds the label armed on a session; a person's own hold is never touched."""
    return select(OperatorHold).where(
        OperatorHold.selector_kind == "session",
        OperatorHold.selector_value == str(session_id),
        col(OperatorHold.armer).startswith(GITHUB_ACTOR_PREFIX),
        col(OperatorHold.released_at).is_(None),
    )
