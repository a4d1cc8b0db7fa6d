"""procrastinate's schema, and the job that runs a turn

On PostgreSQL, turns may run on worker machines through procrastinate (`integrations/turn_queue.py`):
its tables and functions are part of Pacer's schema, made here so `pacer migrate` leaves a
database whole before any worker starts. The SQL is procrastinate 3.10.0's own `schema.sql`,
kept beside this file as it was released: the dependency is pinned to that version, and a new
release comes with a revision that applies its SQL migrations, never a rewrite of this one. A
database where procrastinate made its schema already keeps it. SQLite runs turns in-process and
gets only the column. Both are made only where they are missing, as 0006 makes its table.

A turn records the id of the job that runs it (NULL for a turn run in the deciding process), so
a halt or a recovery decided anywhere can end that job in its own transaction.

Revision ID: 0007
Revises: 0006
"""
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

SCHEMA = Path(__file__).with_name('0007_procrastinate_3_10_0.sql')


def upgrade() -> None:
    bind = op.get_bind()
    if 'job_id' not in {c['name'] for c in sa.inspect(bind).get_columns('turns')}:
        op.add_column('turns', sa.Column('job_id', sa.BigInteger(), nullable=True))
    if bind.dialect.name != 'postgresql' or sa.inspect(bind).has_table('procrastinate_jobs'):
        return
    # psycopg's own cursor with no parameters: procrastinate's functions hold colons and percent
    # signs that SQLAlchemy and psycopg would otherwise take for placeholders.
    with bind.connection.dbapi_connection.cursor() as cursor:
        cursor.execute(SCHEMA.read_text(encoding='utf-8'))


def downgrade() -> None:
    with op.batch_alter_table('turns') as batch:
        batch.drop_column('job_id')
    bind = op.get_bind()
    if bind.dialect.name != 'postgresql':
        return
    for table in ('procrastinate_events', 'procrastinate_periodic_defers', 'procrastinate_jobs', 'procrastinate_workers'):
        bind.exec_driver_sql(f'DROP TABLE IF EXISTS {table} CASCADE')
    functions = bind.exec_driver_sql(
        "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = current_schema() AND p.proname LIKE 'procrastinate\\_%%'"
    ).scalars().all()
    for function in functions:
        bind.exec_driver_sql(f'DROP FUNCTION IF EXISTS {function} CASCADE')
    for type_ in ('procrastinate_job_to_defer_v1', 'procrastinate_job_event_type', 'procrastinate_job_status'):
        bind.exec_driver_sql(f'DROP TYPE IF EXISTS {type_} CASCADE')
