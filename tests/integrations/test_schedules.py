"""Cron schedules on a real APScheduler BackgroundScheduler with its SQLAlchemy job store on a
temp SQLite file: jobs created, changed and removed while it runs, kept across a restart, and a
fire that creates a `schedule` session; a bad crontab line is a clear error naming the field."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from apscheduler.schedulers.background import BackgroundScheduler
from sqlmodel import select

from bot import jobs
from bot.runtime import process
from bot.runtime.process import Pacer
from bot.triggers import writes as store
from bot.triggers.spec import check_spec
from integrations.apscheduler_deferrer import build_scheduler
from integrations.schedules import cron_trigger, job_id, sync_schedules
from scheduler.errors import InvalidInput
from scheduler.steering.firing import schedule_fire
from scheduler.store.db import session_scope
from scheduler.store.models import Session, Trigger
from tests.support.api_client import make_api, settings_for
from tests.support.harness import build


def add(engine, clock, name: str, cron: str, tz: str = "UTC", **extra) -> int:
    spec = check_spec({"name": name, "kind": "schedule", "prompt_template": "sweep {{ fired_at }}",
                       "config": {"cron": cron, "timezone": tz}, **extra})
    with session_scope(engine) as db:
        return store.create_trigger(db, spec, now=clock.now()).trigger.id or 0


def change(engine, clock, trigger_id: int, **changes) -> None:
    with session_scope(engine) as db:
        store.update_trigger(db, db.get(Trigger, trigger_id), changes, now=clock.now())


@pytest.fixture
def aps(engine):
    scheduler = build_scheduler(engine, threads=2)
    scheduler.start()
    yield scheduler
    if scheduler.running:
        scheduler.shutdown(wait=False)


@pytest.mark.parametrize(
    ("expr", "tz", "after", "expected"),
    [
        # Crontab weekdays: 1-5 is Monday to Friday, 0 and 7 are Sunday (APScheduler 3 alone reads 0 as Monday).
        (
            "0 9 * * 1-5",
            "Europe/Vilnius",
            datetime(2026, 11, 7, 12, 0, tzinfo=UTC),
            datetime(2026, 11, 9, 7, 0, tzinfo=UTC),
        ),
        ("0 9 * * 0", "UTC", datetime(2026, 11, 2, 12, 0, tzinfo=UTC), datetime(2026, 11, 8, 9, 0, tzinfo=UTC)),
        ("0 9 * * 7", "UTC", datetime(2026, 11, 2, 12, 0, tzinfo=UTC), datetime(2026, 11, 8, 9, 0, tzinfo=UTC)),
        ("30 6 * * 5-7", "UTC", datetime(2026, 11, 2, 12, 0, tzinfo=UTC), datetime(2026, 11, 6, 6, 30, tzinfo=UTC)),
        ("*/15 * * * *", "UTC", datetime(2026, 11, 2, 12, 1, tzinfo=UTC), datetime(2026, 11, 2, 12, 15, tzinfo=UTC)),
        ("0 0 1 jan *", "America/New_York", datetime(2026, 11, 2, tzinfo=UTC), datetime(2027, 1, 1, 5, 0, tzinfo=UTC)),
        ("0 12 * * mon", "UTC", datetime(2026, 11, 3, tzinfo=UTC), datetime(2026, 11, 9, 12, 0, tzinfo=UTC)),
    ],
)
def test_crontab_lines_fire_when_crontab_says(expr, tz, after, expected) -> None:
    fire_at = cron_trigger(expr, tz).get_next_fire_time(None, after)
    assert fire_at == expected


@pytest.mark.parametrize(
    ("expr", "tz", "field", "says"),
    [
        ("61 * * * *", "UTC", "config.cron", "the minute field '61'"),
        ("0 24 * * *", "UTC", "config.cron", "the hour field '24' is not valid"),
        ("0 0 0 * *", "UTC", "config.cron", "the day of month field '0'"),
        ("0 0 * 13 *", "UTC", "config.cron", "the month field '13'"),
        ("0 0 * * 8", "UTC", "config.cron", "the day of week field '8'"),
        ("0 0 * * 1,tue", "UTC", "config.cron", "the day of week field"),
        ("0 0 * *", "UTC", "config.cron", "has 4 fields; a crontab line has five"),
        ("@daily", "UTC", "config.cron", "has 1 field;"),
        ("0 0 * * *", "Europe/Atlantis", "config.timezone", "not an IANA time zone"),
    ],
)
def test_a_bad_crontab_line_names_the_field_and_what_it_takes(expr, tz, field, says) -> None:
    with pytest.raises(InvalidInput) as raised:
        cron_trigger(expr, tz)
    assert raised.value.field == field and says in str(raised.value)


def test_jobs_are_created_changed_and_removed_while_the_scheduler_runs(engine, clock, aps: BackgroundScheduler) -> None:
    aps.add_job("bot.jobs:run", "date", run_date=datetime(2030, 1, 1, tzinfo=UTC), args=["recheck", 1], id="recheck:1")
    nightly = add(engine, clock, "nightly", "0 3 * * *", "Europe/Vilnius")
    hourly = add(engine, clock, "hourly", "0 * * * *")
    report = sync_schedules(aps, engine)
    assert report.added == [nightly, hourly] and report.removed == []
    job = aps.get_job(job_id(nightly))
    assert (
        job.args == ("schedule_fire", nightly)
        and "Europe/Vilnius" in repr(job.trigger)
        and job.name == "schedule nightly"
    )
    first_run = job.next_run_time

    assert sync_schedules(aps, engine).unchanged == [nightly, hourly]
    assert aps.get_job(job_id(nightly)).next_run_time == first_run  # untouched, so a missed fire still runs

    change(engine, clock, nightly, config={"cron": "15 4 * * 1-5", "timezone": "UTC"})
    report = sync_schedules(aps, engine)
    assert report.replaced == [nightly] and report.unchanged == [hourly]
    assert "hour='4'" in repr(aps.get_job(job_id(nightly)).trigger) and "mon,tue" in repr(
        aps.get_job(job_id(nightly)).trigger
    )

    change(engine, clock, hourly, enabled=False)
    assert sync_schedules(aps, engine).removed == [job_id(hourly)] and aps.get_job(job_id(hourly)) is None
    with session_scope(engine) as db:
        store.delete_trigger(db, db.get(Trigger, nightly), now=clock.now())
    assert sync_schedules(aps, engine).removed == [job_id(nightly)]
    assert [j.id for j in aps.get_jobs()] == ["recheck:1"]  # other alarms are never touched


def test_jobs_survive_a_restart_in_the_same_job_store(engine, clock, aps: BackgroundScheduler) -> None:
    tid = add(engine, clock, "weekly", "0 8 * * 1")
    sync_schedules(aps, engine)
    aps.shutdown(wait=False)
    again = build_scheduler(engine, threads=1)
    again.start(paused=True)
    try:
        job = again.get_job(job_id(tid))
        assert job is not None and job.args == ("schedule_fire", tid)
        assert sync_schedules(again, engine).unchanged == [tid]
    finally:
        again.shutdown(wait=False)


def test_a_fire_creates_a_schedule_session_from_the_template(engine, clock, aps: BackgroundScheduler) -> None:
    ctx, *_ = build(engine, clock)
    tid = add(engine, clock, "sweep", "0 3 * * *", precedence=7)
    sync_schedules(aps, engine)
    previous = jobs.install(ctx)
    try:
        aps.modify_job(job_id(tid), next_run_time=datetime.now(UTC))  # due now: the real job runs
        deadline = time.monotonic() + 5
        rows: list[Session] = []
        while time.monotonic() < deadline and not rows:
            time.sleep(0.02)
            with session_scope(engine) as db:
                rows = list(db.exec(select(Session)))
    finally:
        jobs.install(previous)
    assert len(rows) == 1
    s = rows[0]
    assert s.genesis == "schedule" and s.trigger_id == tid and s.precedence == 7
    assert s.prompt == f"sweep {clock.now().isoformat()}" and s.source["kind"] == "schedule"
    assert aps.get_job(job_id(tid)).next_run_time > datetime.now(UTC)  # the next fire is armed


def test_a_fire_for_a_disabled_or_deleted_trigger_creates_nothing(engine, clock) -> None:
    ctx, *_ = build(engine, clock)
    tid = add(engine, clock, "off", "0 3 * * *")
    change(engine, clock, tid, enabled=False)
    assert schedule_fire(ctx, tid) is None and schedule_fire(ctx, 999) is None
    change(engine, clock, tid, enabled=True)
    assert schedule_fire(ctx, tid) is not None


def test_the_api_keeps_the_jobs_in_line_with_its_trigger_writes(engine, clock, aps: BackgroundScheduler) -> None:
    api = make_api(engine, clock)
    api.pacer.scheduler = aps
    try:
        created = api.post("/triggers", {"name": "n", "kind": "schedule", "prompt_template": "sweep",
                                         "config": {"cron": "0 3 * * *"}}).json()
        assert aps.get_job(job_id(created["id"])) is not None
        api.patch(f"/triggers/{created['id']}", {"config": {"cron": "0 5 * * *", "timezone": "Asia/Tokyo"}})
        assert "hour='5'" in repr(aps.get_job(job_id(created["id"])).trigger)
        assert "Asia/Tokyo" in repr(aps.get_job(job_id(created["id"])).trigger)
        api.delete(f"/triggers/{created['id']}")
        assert aps.get_job(job_id(created["id"])) is None
    finally:
        api.close()


def test_the_leaders_resync_job_picks_up_triggers_written_elsewhere(engine, clock, aps: BackgroundScheduler) -> None:
    ctx, deferrer, *_ = build(engine, clock)
    pacer = Pacer(settings=settings_for(engine), engine=engine, clock=clock, deferrer=deferrer, ctx=ctx, scheduler=aps)
    ctx.jobs = {**ctx.jobs, **process.periodic_targets(pacer)}
    previous = jobs.install(ctx)
    try:
        tid = add(engine, clock, "written-on-a-replica", "0 6 * * *")
        assert aps.get_job(job_id(tid)) is None
        jobs.run(process.TRIGGER_RESYNC)  # what the leader's periodic job runs
        assert aps.get_job(job_id(tid)) is not None
    finally:
        jobs.install(previous)
