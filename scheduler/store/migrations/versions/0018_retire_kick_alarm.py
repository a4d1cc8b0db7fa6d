"""alarms stored under the queue pass's old name, "kick", name "queue_pass"

An alarm is a row of APScheduler's job table whose `job_state` is APScheduler's own pickle of the
job's state (`Job.__getstate__`, a dict): the callable by its import path (`bot.jobs:run`) and
its arguments, the first of which is the alarm target's name (`scheduler.alarms`). The queue
pass was once armed under the name "kick"; the target no longer answers to it, so a row a job
store still holds under it is rewritten here to name "queue_pass", its trigger and next run
untouched.

The state is read and written as APScheduler's SQLAlchemy job store does (`pickle.loads`, then
`pickle.dumps(state, pickle.HIGHEST_PROTOCOL)`), without rebuilding the Job: that would import
the callable, and a migration imports nothing of the process it migrates. A row that cannot be
read is left as it is (APScheduler drops it the same way when it loads it).

Revision ID: 0018
Revises: 0017
"""
import logging
import pickle

import sqlalchemy as sa
from alembic import op

revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")

TABLE = 'apscheduler_jobs'
OLD, NEW = 'kick', 'queue_pass'


def _renamed(job_state: bytes, old: str, new: str) -> bytes | None:
    """The job state with its target `old` renamed `new`; None when it names another target."""
    if old.encode() not in job_state:
        return None  # the name is not in the pickle at all: nothing to read
    try:
        state = pickle.loads(job_state)
    except Exception:
        log.warning("an APScheduler job row could not be read; left as it is")
        return None
    args = tuple(state.get('args') or ()) if isinstance(state, dict) else ()
    if not args or args[0] != old:
        return None
    state['args'] = (new, *args[1:])
    return pickle.dumps(state, pickle.HIGHEST_PROTOCOL)


def _rename(old: str, new: str) -> None:
    bind = op.get_bind()
    if not sa.inspect(bind).has_table(TABLE):
        return
    jobs = sa.table(TABLE, sa.column('id', sa.Unicode(191)), sa.column('job_state', sa.LargeBinary()))
    for job_id, job_state in bind.execute(sa.select(jobs.c.id, jobs.c.job_state)).all():
        state = _renamed(bytes(job_state), old, new)
        if state is not None:
            bind.execute(jobs.update().where(jobs.c.id == job_id).values(job_state=state))
            log.info("alarm %s now names %r instead of %r", job_id, new, old)


def upgrade() -> None:
    _rename(OLD, NEW)


def downgrade() -> None:
    pass  # "queue_pass" is what every release since the rename arms; nothing to give back
