"""Alarm target names: one constant each (`scheduler.alarms`), every one a target, and a job row an
older release stored under the retired name "kick" rewritten by migration 0018 to "queue_pass",
read back through APScheduler's own job store on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from alembic import command
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import Engine, text

from bot import jobs as bot_jobs
from scheduler import alarms
from scheduler.jobs import targets
from scheduler.store import db as dbmod
from scheduler.wiring import PERIODIC


def test_every_alarm_name_is_a_target_and_every_target_has_a_name() -> None:
    names = {value for key, value in vars(alarms).items() if key.isupper()}
    assert names == set(targets())
    assert set(PERIODIC) <= names
    assert "kick" not in targets()


def _stored_jobs(engine: Engine) -> dict[str, tuple[tuple[object, ...], datetime | None, str]]:
    store = SQLAlchemyJobStore(engine=engine, tablename="apscheduler_jobs")
    return {job.id: (tuple(job.args), job.next_run_time, job.func_ref) for job in store.get_all_jobs()}


def test_the_migration_renames_the_stored_kick_alarms_and_leaves_the_others(any_engine: Engine) -> None:
    url = any_engine.url.render_as_string(hide_password=False)
    at = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(engine=any_engine, tablename="apscheduler_jobs")}, timezone="UTC"
    )
    scheduler.start(paused=True)  # writes the jobs to the table, fires none
    try:
        scheduler.add_job(bot_jobs.run, "date", run_date=at, args=["kick"], id="kick")
        scheduler.add_job(bot_jobs.run, "date", run_date=at + timedelta(minutes=1), args=["recheck", 7], id="recheck:7")
        scheduler.add_job(
            bot_jobs.run, "interval", minutes=5, args=["hold_sweep"], id="periodic:hold_sweep", next_run_time=at
        )
    finally:
        scheduler.shutdown(wait=False)
    before = _stored_jobs(any_engine)
    with any_engine.begin() as conn:  # a row APScheduler cannot read, with the old name in its bytes
        conn.execute(
            text("INSERT INTO apscheduler_jobs (id, next_run_time, job_state) VALUES ('broken', 1.0, :s)"),
            {"s": b"not a kick pickle"},
        )
        conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
    cfg = dbmod.alembic_config(url)
    command.stamp(cfg, "0017")
    command.upgrade(cfg, "head")
    try:
        with any_engine.connect() as conn:
            assert (
                conn.execute(text("SELECT job_state FROM apscheduler_jobs WHERE id = 'broken'")).scalar_one()
                == b"not a kick pickle"
            )
        after = _stored_jobs(any_engine)
        assert after["kick"] == (("queue_pass",), before["kick"][1], "bot.jobs:run")
        assert after["recheck:7"] == before["recheck:7"] == (("recheck", 7), at + timedelta(minutes=1), "bot.jobs:run")
        assert after["periodic:hold_sweep"] == before["periodic:hold_sweep"]
    finally:
        with any_engine.begin() as conn:
            conn.execute(text("DELETE FROM apscheduler_jobs"))
