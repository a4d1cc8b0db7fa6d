"""No event lost: what GitHub sent while Pacer was down, or could not hand over, caught up.

GitHub never redelivers a failed delivery by itself. So the leader, at its election and then
every CATCH_UP_EVERY (an alarm target beside the other sweeps, never on a request), does two
things (`catch_up`):

  1. Re-scan the trigger labels (`rescan_labels`): for every enabled github_label trigger, every
     repository the credentials see (those the trigger names, when it names some) and every open
     issue or pull request carrying its label without a session of that trigger, it builds the
     `labeled` event GitHub would have sent, the labeler read from the issue's events, and takes
     it through the webhook's own intake (`bot.github.intake.github_event`): the same trust,
     matching and prompt, and the same intake key, so the label's delivery arriving later (or a
     second process re-scanning at the same moment) finds the key taken and creates nothing;
     the unique constraint on the ledger is the backstop when two transactions race.
  2. Redeliver what failed (`redeliver_failed`), with a GitHub App only (a personal token has
     no deliveries of its own to read: with GITHUB_TOKEN the re-scan alone applies). It reads
     the App's deliveries since the last look (less CATCH_UP_OVERLAP; at most KEPT, the 3 days
     GitHub keeps them), and asks GitHub to redeliver each event (a guid) none of whose
     attempts was answered OK and which Pacer has not recorded (a delivery answered too late
     was taken all the same). Each guid is asked for once: the ask is written in the ledger,
     under REDELIVER_HOOK_ID, before it is sent. A 2xx answer is never redelivered: Pacer
     answers 200 to the events it does not act on without keeping a record of them.

A redelivery comes back through `POST /github/webhook` like any delivery, and its intake key
keeps a label that the re-scan took already from starting a second session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Table
from sqlalchemy import select as core_select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection
from sqlmodel import col, select

from bot.github import events
from bot.github.intake import github_event, taken
from bot.github.matching import DEFAULT_TRIGGER_LABEL
from bot.runtime.adapters import github_clients
from bot.runtime.process import LEADER_JOBS, Pacer
from integrations.github.catch_up import AppDeliveries, DeliveriesPort, Delivery, LabeledPort, OpenLabeled
from scheduler.front import Context, Trigger, WebhookDelivery, session_scope

log = logging.getLogger("pacer.github")

CATCH_UP = "github_catch_up"
CATCH_UP_EVERY = timedelta(hours=1)
KEPT = timedelta(days=3)  # how long GitHub keeps an App's deliveries
CATCH_UP_OVERLAP = timedelta(minutes=10)  # a look reaches back this far before the last one began
REDELIVER_HOOK_ID = "pacer:redeliver"  # + the guid: asked once
LOOKED_HOOK_ID = "pacer:catch-up"  # one row, delivery_id "deliveries": when the last look began
_LOOKED = "deliveries"
_DELIVERIES: Table = WebhookDelivery.__table__  # type: ignore[attr-defined]


@dataclass
class CaughtUp:
    created: list[int] = field(default_factory=list)  # sessions the re-scan started
    redelivered: list[str] = field(default_factory=list)  # guids GitHub was asked to send again


def register(pacer: Pacer) -> None:
    """Make the catch-up an alarm target the leader runs at its election and every CATCH_UP_EVERY."""
    clients = github_clients(pacer.settings)

    def target(_ctx: Context) -> CaughtUp | None:
        if clients is None:
            log.debug("github: no token or App configured; nothing to catch up on")
            return None
        deliveries = AppDeliveries(clients) if clients.is_app else None
        return catch_up(pacer, OpenLabeled(clients), deliveries)

    pacer.ctx.jobs = {**pacer.ctx.jobs, CATCH_UP: target}
    pacer.extras.setdefault(LEADER_JOBS, {})[CATCH_UP] = CATCH_UP_EVERY


def catch_up(pacer: Pacer, labeled: LabeledPort, deliveries: DeliveriesPort | None) -> CaughtUp:
    """The re-scan, then the redeliveries (App only); one failing is logged and the other still runs."""
    result = CaughtUp()
    try:
        result.created = rescan_labels(pacer, labeled)
    except Exception:
        log.exception("github: the trigger-label re-scan failed; the next one is in %s", CATCH_UP_EVERY)
    if deliveries is None:
        log.info("github: with a personal token there are no App deliveries to redeliver; the label re-scan ran alone")
        return result
    try:
        result.redelivered = redeliver_failed(pacer.engine, deliveries, pacer.clock.now())
    except Exception:
        log.exception("github: reading or redelivering the App's deliveries failed; the next try is in %s",
                      CATCH_UP_EVERY)
    return result


def rescan_labels(pacer: Pacer, port: LabeledPort) -> list[int]:
    """Start the work of every trigger label added while Pacer was not listening, once."""
    with session_scope(pacer.engine) as db:
        triggers = db.exec(
            select(Trigger).where(Trigger.kind == events.Kind.GITHUB_LABEL.value, col(Trigger.enabled).is_(True))
        ).all()
        wanted = [(t.id or 0, _label(t), _repositories(t)) for t in triggers]
    if not wanted:
        return []
    created: list[int] = []
    bot_login = str(pacer.settings.github_bot_login or "")
    for repository, installation_id in port.repositories():
        for label in sorted({label for _, label, _ in wanted}):
            ids = [tid for tid, lab, repos in wanted if lab == label and (not repos or repository.lower() in repos)]
            if not ids:
                continue
            for item in port.labeled(repository, installation_id, label):
                number = item.get("number")
                if not isinstance(number, int) or _all_taken(pacer, ids, f"{repository}#{number}"):
                    continue
                event = _labeled_event(port, repository, installation_id, item, label, bot_login)
                if event is not None:
                    created += github_event(pacer, event)
    if created:
        log.info("github: the label re-scan started session(s) %s", ", ".join(f"#{i}" for i in created))
    return created


def _all_taken(pacer: Pacer, trigger_ids: list[int], issue_key: str) -> bool:
    with session_scope(pacer.engine) as db:
        return all(taken(db, tid, issue_key) for tid in trigger_ids)


def _labeled_event(
    port: LabeledPort, repository: str, installation_id: int | None, item: dict[str, Any], label: str, bot_login: str
) -> events.IntakeEvent | None:
    """The `labeled` delivery GitHub would have sent, parsed as the webhook parses it."""
    number = int(item["number"])
    names = [x.get("name") for x in item.get("labels") or [] if isinstance(x, dict)]
    label = next((n for n in names if isinstance(n, str) and n.lower() == label), label)  # as GitHub spells it
    actor = port.labeler(repository, installation_id, number, label)
    if actor is None:
        log.info("github: %s#%s carries %r but no event says who added it; left alone", repository, number, label)
        return None
    is_pull = isinstance(item.get("pull_request"), dict)
    noun = "pull_request" if is_pull else "issue"
    body = {**item, **port.pull(repository, installation_id, number)} if is_pull else item
    payload = {
        "action": "labeled", noun: body, "label": {"name": label},
        "repository": {"full_name": repository, "name": repository.split("/")[-1]},
        "sender": {"login": actor.get("login"), "type": actor.get("type") or "User"},
        **({"installation": {"id": installation_id}} if installation_id is not None else {}),
    }
    parsed = events.parse(noun if is_pull else "issues", payload, bot_login=bot_login)
    if isinstance(parsed, events.Ignored):
        log.info("github: re-scan of %s#%s: %s", repository, number, parsed.reason)
        return None
    return parsed


def redeliver_failed(engine: Any, port: DeliveriesPort, now: datetime) -> list[str]:
    """Ask GitHub once for each event none of whose attempts reached Pacer; the guids asked for."""
    with engine.begin() as conn:
        looked = conn.execute(
            core_select(_DELIVERIES.c.received_at).where(
                _DELIVERIES.c.hook_id == LOOKED_HOOK_ID, _DELIVERIES.c.delivery_id == _LOOKED
            )
        ).scalar()
    since = max(now - KEPT, looked - CATCH_UP_OVERLAP) if looked is not None else now - KEPT
    attempts: dict[str, list[Delivery]] = {}
    for delivery in port.recent(since):
        attempts.setdefault(delivery.guid, []).append(delivery)
    failed = {guid: tries for guid, tries in attempts.items() if not any(t.ok for t in tries)}
    asked: list[str] = []
    if failed:
        with engine.begin() as conn:
            recorded = set(conn.execute(
                core_select(_DELIVERIES.c.delivery_id).where(
                    col(_DELIVERIES.c.delivery_id).in_(sorted(failed)),
                    ~col(_DELIVERIES.c.hook_id).startswith("pacer:"),
                )
            ).scalars())
        for guid, tries in sorted(failed.items(), key=lambda kv: min(t.delivered_at for t in kv[1])):
            if guid in recorded or not _ask_once(engine, guid, tries[0].event, now):
                continue
            newest = max(tries, key=lambda t: t.delivered_at)
            port.redeliver(newest.id)
            asked.append(guid)
            log.info("github: asked GitHub to redeliver %s (%s, last %s)", guid, newest.event, newest.status)
    with engine.begin() as conn:
        _upsert(conn, {"hook_id": LOOKED_HOOK_ID, "delivery_id": _LOOKED, "event": "", "received_at": now}, update=True)
    return asked


def _ask_once(engine: Any, guid: str, event: str, now: datetime) -> bool:
    """Write that Pacer asks for `guid` again; False when it (or another leader) asked before."""
    with engine.begin() as conn:
        row = {"hook_id": REDELIVER_HOOK_ID, "delivery_id": guid[:100], "event": event[:100], "received_at": now}
        return _upsert(conn, row, update=False)


def _upsert(conn: Connection, row: dict[str, Any], *, update: bool) -> bool:
    insert: Callable[..., Any] = postgresql_insert if conn.dialect.name == "postgresql" else sqlite_insert
    statement = insert(_DELIVERIES).values(row)
    if update:
        statement = statement.on_conflict_do_update(
            index_elements=["hook_id", "delivery_id"], set_={"received_at": row["received_at"]}
        )
    else:
        statement = statement.on_conflict_do_nothing()
    return conn.execute(statement.returning(_DELIVERIES.c.id)).first() is not None


def _label(trigger: Trigger) -> str:
    return str((trigger.config or {}).get("label") or DEFAULT_TRIGGER_LABEL).lower()


def _repositories(trigger: Trigger) -> set[str]:
    named = (trigger.config or {}).get("repositories")
    if isinstance(named, str):
        named = [named]
    return {str(r).lower() for r in named} if isinstance(named, list) else set()
