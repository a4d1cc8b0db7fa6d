"""Writing triggers: create, change, delete and upsert by name, for the REST API and triggers.toml.

A class change goes through `scheduler.store.ranking.change_trigger_class` (this trigger's sessions
that are still waiting and still carry its stamp move with it) and reports how many moved. The
promoted ones are released by the `trigger_release` alarm, which `after_write` arms only once the
caller's transaction has committed; the same call re-syncs the cron jobs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlmodel import Session as DBSession
from sqlmodel import col, func, select

from bot.triggers.kind_config import check_config
from bot.triggers.spec import (
    TriggerSpec,
    check_class,
    check_group,
    check_name,
    check_precedence,
    check_template,
)
from integrations.schedules import sync_schedules
from scheduler.errors import InvalidInput, Refused
from scheduler.front import (
    Context,
    Reclassification,
    Session,
    Trigger,
    arm_release,
    change_trigger_class,
    get_trigger,
    session_scope,
)
from templates import error_text

log = logging.getLogger("pacer.triggers")

CHANGEABLE = ("name", "scheduling_class", "precedence", "prompt_template", "config", "concurrency_group", "enabled")


@dataclass(frozen=True)
class TriggerWrite:
    trigger: Trigger
    created: bool = False
    changed: tuple[str, ...] = ()  # the fields whose value moved
    reclassified: Reclassification | None = None

    @property
    def moved(self) -> int:
        """Sessions that actually moved between classes (the seed's reclassified_waiting_sessions)."""
        return self.reclassified.moved if self.reclassified is not None else 0

    @property
    def promoted(self) -> tuple[int, ...]:
        return self.reclassified.promoted_ids if self.reclassified is not None else ()


def by_name(db: DBSession, name: str) -> Trigger | None:
    return db.exec(select(Trigger).where(Trigger.name == name)).first()


def _unique_name(db: DBSession, name: str, own_id: int | None = None) -> None:
    other = by_name(db, name)
    if other is not None and other.id != own_id:
        raise Refused(error_text("triggers/name_taken", name=name, other_id=other.id))


def create_trigger(db: DBSession, spec: TriggerSpec, *, now: datetime) -> TriggerWrite:
    _unique_name(db, spec.name)
    trigger = Trigger(
        name=spec.name, kind=spec.kind, scheduling_class=spec.scheduling_class, precedence=spec.precedence,
        prompt_template=spec.prompt_template, config=dict(spec.config), concurrency_group=spec.concurrency_group,
        enabled=spec.enabled, created_at=now,
    )
    db.add(trigger)
    db.flush()
    log.info("trigger %r (#%s, %s) created", trigger.name, trigger.id, trigger.kind)
    return TriggerWrite(trigger, created=True, changed=tuple(CHANGEABLE))


def check_changes(trigger: Trigger, changes: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a partial update against the trigger's kind; nothing is written here."""
    if "kind" in changes and changes["kind"] != trigger.kind:
        raise InvalidInput(
            error_text("triggers/kind_change", old=trigger.kind, new=changes["kind"]),
            field="kind",
        )
    unknown = [k for k in changes if k not in (*CHANGEABLE, "kind")]
    if unknown:
        raise InvalidInput(error_text("triggers/not_a_field", key=unknown[0], changeable=CHANGEABLE), field=unknown[0])
    checked: dict[str, Any] = {}
    for key, value in changes.items():
        if key == "name":
            checked[key] = check_name(value)
        elif key == "scheduling_class":
            checked[key] = check_class(value)
        elif key == "precedence":
            checked[key] = check_precedence(value)
        elif key == "prompt_template":
            checked[key] = check_template(value, trigger.kind, changes.get("config", trigger.config))
        elif key == "config":
            checked[key] = check_config(trigger.kind, value)
        elif key == "concurrency_group":
            checked[key] = check_group(value)
        elif key == "enabled":
            if not isinstance(value, bool):
                raise InvalidInput(error_text("trigger_spec/not_bool", field="enabled"), field="enabled")
            checked[key] = value
    return checked


def update_trigger(db: DBSession, trigger: Trigger, changes: Mapping[str, Any], *, now: datetime) -> TriggerWrite:
    checked = check_changes(trigger, changes)
    if "name" in checked:
        _unique_name(db, checked["name"], trigger.id)
    changed: list[str] = []
    reclassified = None
    if "scheduling_class" in checked and checked["scheduling_class"] != trigger.scheduling_class:
        reclassified = change_trigger_class(db, trigger, checked["scheduling_class"], now=now)
        changed.append("scheduling_class")
    for key, value in checked.items():
        if key == "scheduling_class":
            continue
        if getattr(trigger, key) != value:
            setattr(trigger, key, value)
            changed.append(key)
    db.add(trigger)
    db.flush()
    if changed:
        log.info("trigger %r (#%s) changed: %s", trigger.name, trigger.id, ", ".join(changed))
    return TriggerWrite(trigger, changed=tuple(changed), reclassified=reclassified)


def upsert(db: DBSession, spec: TriggerSpec, *, now: datetime) -> TriggerWrite:
    """Create `spec`, or bring the trigger of that name in line with it (triggers as code)."""
    existing = by_name(db, spec.name)
    if existing is None:
        return create_trigger(db, spec, now=now)
    if existing.kind != spec.kind:
        raise InvalidInput(
            error_text("triggers/kind_differs", name=spec.name, kind=existing.kind),
            field="kind",
        )
    changes = {key: getattr(spec, key) for key in CHANGEABLE if key != "name"}
    return update_trigger(db, existing, changes, now=now)


def delete_trigger(db: DBSession, trigger: Trigger, *, now: datetime) -> int:
    """Delete it; its sessions keep their genesis, class and the trigger's name in `source`,
    and lose only the link. Returns how many sessions were detached."""
    detached = db.execute(
        update(Session).where(col(Session.trigger_id) == trigger.id).values(trigger_id=None, updated_at=now)
    )
    db.delete(trigger)
    db.flush()
    log.info("trigger %r (#%s) deleted; %s sessions detached", trigger.name, trigger.id, detached.rowcount)  # type: ignore[attr-defined]
    return int(detached.rowcount or 0)  # type: ignore[attr-defined]


def session_count(db: DBSession, trigger_id: int) -> int:
    return int(db.exec(select(func.count()).select_from(Session).where(Session.trigger_id == trigger_id)).one())


def after_write(
    ctx: Context | None, scheduler: Any, engine: Any, writes: Sequence[tuple[int, Sequence[int]]] = ()
) -> None:
    """After the trigger write committed: release each trigger's promoted sessions (off the
    request, through the alarm) and bring the cron jobs in line. `writes` is (trigger id,
    promoted session ids) per written trigger."""
    if ctx is not None:
        for trigger_id, promoted in writes:
            arm_release(ctx, trigger_id, promoted)
    if scheduler is not None:
        sync_schedules(scheduler, engine)


@dataclass(frozen=True)
class TriggerChange:
    """A committed change to one trigger: its plain form before and after, and the write."""

    before: dict[str, Any]
    after: dict[str, Any]
    write: TriggerWrite


def change_trigger(
    ctx: Context, scheduler: Any, trigger_id: int, changes: Mapping[str, Any], *, actor: str
) -> TriggerChange:
    """The one trigger change every surface makes: validate and write in one transaction, then,
    once it has committed, release the sessions a promotion moved (through the alarm, which
    leaves paused and parked ones alone), bring the cron jobs in line and record who did it."""
    with session_scope(ctx.engine) as db:
        trigger = get_trigger(db, trigger_id)
        before = plain(trigger)
        write = update_trigger(db, trigger, changes, now=ctx.clock.now())
        after = plain(write.trigger, sessions=session_count(db, trigger_id))
    after_write(ctx, scheduler, ctx.engine, [(trigger_id, write.promoted)])
    if write.changed:
        # WARN on purpose, as a policy change does: a trigger's class moves every session it spawns.
        log.warning("trigger #%s changed by %s: %s", trigger_id, actor,
                    ", ".join(f"{key} {before[key]} -> {after[key]}" for key in write.changed))
    return TriggerChange(before, after, write)


def plain(trigger: Trigger, *, sessions: int | None = None) -> dict[str, Any]:
    out = {
        "id": trigger.id,
        "name": trigger.name,
        "kind": trigger.kind,
        "scheduling_class": trigger.scheduling_class or "default",
        "precedence": trigger.precedence,
        "prompt_template": trigger.prompt_template,
        "config": dict(trigger.config or {}),
        "concurrency_group": trigger.concurrency_group,
        "enabled": trigger.enabled,
        "created_at": trigger.created_at,
    }
    if sessions is not None:
        out["sessions"] = sessions
    return out
