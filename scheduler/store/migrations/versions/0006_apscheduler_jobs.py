"""APScheduler's job table

The alarms (re-checks, sweeps, cron triggers) live in APScheduler's SQLAlchemy job store, in the
same database. APScheduler would create the table the first time a scheduler starts; created
here, the schema is whole once `pacer migrate` (Fly's release command) has run, before any
process starts, and a database that APScheduler already gave the table keeps it as it is.
The shape is APScheduler 3's own (apscheduler/jobstores/sqlalchemy.py).

Revision ID: 0006
Revises: 0005
"""
import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

TABLE = 'apscheduler_jobs'


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table(TABLE):
        return
    op.create_table(
        TABLE,
        sa.Column('id', sa.Unicode(191), primary_key=True),
        sa.Column('next_run_time', sa.Float(25)),
        sa.Column('job_state', sa.LargeBinary(), nullable=False),
    )
    op.create_index(f'ix_{TABLE}_next_run_time', TABLE, ['next_run_time'])


def downgrade() -> None:
    op.drop_index(f'ix_{TABLE}_next_run_time', table_name=TABLE)
    op.drop_table(TABLE)
