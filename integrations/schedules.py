"""Cron schedules on APScheduler: one `cron:<trigger id>` job per enabled schedule trigger, in
the same SQLAlchemy job store as the re-check alarms, so a schedule survives a restart.

`sync_schedules` makes the jobs match the triggers (add, replace what changed, remove what is
gone or disabled); call it at start and after every trigger write. A job is a reference to the
module-level `bot.jobs.run` plus the target name and the trigger id, so a pickled job keeps
working across deploys; each fire runs `scheduler.steering.firing.schedule_fire`.

Crontab weekdays: APScheduler 3 numbers Monday 0, crontab numbers Sunday 0 (APScheduler issue
286). A team writes `1-5` meaning Monday to Friday, so numeric weekdays are translated to names
before APScheduler sees them.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger
from sqlalchemy import Engine
from sqlmodel import col, select

from scheduler import alarms
from scheduler.errors import InvalidInput
from scheduler.store.db import session_scope
from scheduler.store.models import Trigger
from templates import error_text

log = logging.getLogger("pacer.schedules")

JOB_PREFIX = "cron:"
JOB_FUNC = "bot.jobs:run"
TARGET = alarms.SCHEDULE_FIRE
# Crontab order, with the name APScheduler gives each field and what a value may be.
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("minute", "minute", "0-59"),
    ("hour", "hour", "0-23"),
    ("day of month", "day", "1-31"),
    ("month", "month", "1-12 or jan-dec"),
    ("day of week", "day_of_week", "0-7 (0 and 7 are Sunday) or sun-sat"),
)
WEEKDAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NUMERIC_PART = re.compile(r"^(\*|\d+)(?:-(\d+))?(?:/(\d+))?$")


def job_id(trigger_id: int) -> str:
    return f"{JOB_PREFIX}{trigger_id}"


def check_timezone(name: str, *, field: str = "config.timezone") -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(error_text("schedules/not_a_zone", field=field, name=name), field=field) from None


def crontab_weekdays(value: str) -> str:
    """Translate crontab's numeric weekdays (Sunday 0 or 7) into names APScheduler reads the
    same way crontab does. Names and `*` pass through untouched."""
    if value == "*" or not any(ch.isdigit() for ch in value):
        return value
    days: set[int] = set()
    for part in value.split(","):
        m = _NUMERIC_PART.match(part)
        if m is None:
            raise ValueError(error_text("schedules/weekday_mixed", part=part))
        first, last, step = m.group(1), m.group(2), m.group(3)
        start, end = (0, 6) if first == "*" else (int(first), int(last) if last is not None else int(first))
        if first != "*" and last is None and step is not None:
            end = 6  # `1/2` means from Monday, every other day
        if not (0 <= start <= 7 and 0 <= end <= 7) or start > end:
            raise ValueError(error_text("schedules/weekday_range", part=part))
        days.update(d % 7 for d in range(start, end + 1, int(step or 1)))
    return ",".join(WEEKDAY_NAMES[d] for d in sorted(days))


def cron_trigger(expr: str, timezone: str = "UTC", *, field: str = "config.cron") -> CronTrigger:
    """A crontab line (minute hour day-of-month month day-of-week) as a CronTrigger. A bad line
    is an InvalidInput that names the crontab field and what it may be."""
    tz = check_timezone(timezone)
    parts = str(expr).split()
    if len(parts) != 5:
        raise InvalidInput(error_text("schedules/field_count", field=field, expr=expr, count=len(parts)), field=field)
    kwargs: dict[str, Any] = {}
    for (label, name, allowed), raw in zip(FIELDS, parts, strict=True):
        try:
            value = crontab_weekdays(raw) if name == "day_of_week" else raw
            CronTrigger(**{name: value}, timezone=tz)
        except ValueError as exc:
            raise InvalidInput(
                error_text("schedules/bad_field", field=field, label=label, raw=raw, problem=exc, allowed=allowed),
                field=field,
            ) from None
        kwargs[name] = value
    return CronTrigger(**kwargs, timezone=tz)


@dataclass
class SyncReport:
    added: list[int] = field(default_factory=list)
    replaced: list[int] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)
    broken: dict[int, str] = field(default_factory=dict)  # trigger id -> why it has no job


def sync_schedules(apscheduler: Any, engine: Engine) -> SyncReport:
    """Make the `cron:` jobs match the enabled schedule triggers. A job whose cron and time zone
    are unchanged is left as it is, so a fire that was due while Pacer was down still runs."""
    report = SyncReport()
    with session_scope(engine) as db:
        rows = list(db.exec(select(Trigger).where(Trigger.kind == "schedule", col(Trigger.enabled).is_(True))))
        wanted = {t.id: (t.name, dict(t.config or {})) for t in rows if t.id is not None}
    existing = {job.id: job for job in apscheduler.get_jobs() if str(job.id).startswith(JOB_PREFIX)}
    for trigger_id, (name, config) in sorted(wanted.items()):
        try:
            cron = cron_trigger(str(config.get("cron", "")), str(config.get("timezone") or "UTC"))
        except InvalidInput as exc:  # stored before validation existed: say so, fire nothing
            report.broken[trigger_id] = str(exc)
            log.error("schedule trigger %r (#%s) has no job: %s", name, trigger_id, exc)
            continue
        current = existing.pop(job_id(trigger_id), None)
        if current is not None and repr(current.trigger) == repr(cron) and list(current.args) == [TARGET, trigger_id]:
            report.unchanged.append(trigger_id)
            continue
        apscheduler.add_job(
            JOB_FUNC, trigger=cron, args=[TARGET, trigger_id], id=job_id(trigger_id),
            name=f"schedule {name}", replace_existing=True,
        )
        (report.replaced if current is not None else report.added).append(trigger_id)
    for stale in sorted(existing):
        apscheduler.remove_job(stale)
        report.removed.append(stale)
    if report.added or report.replaced or report.removed:
        log.info("schedules synced: added %s, replaced %s, removed %s", report.added, report.replaced, report.removed)
    return report
