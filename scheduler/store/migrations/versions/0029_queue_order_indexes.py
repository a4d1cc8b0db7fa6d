"""index the queue's order, and the paused sessions

A queue pass read each page of the queue by sorting every waiting row, and asked for the first
paused session by scanning them too: 15 ms a pass at 10,000 waiting, 130–153 ms at 100,000 on
SQLite (issue 32, P20 item 4). These indexes hold the order within each band of a page
(`scheduler/engine/candidates.py`), and the few paused rows apart, so a pass reads the head of
the queue and no more.

Revision ID: 0029
Revises: 0028
"""
import sqlalchemy as sa
from alembic import op

revision = '0029'
down_revision = '0028'
branch_labels = None
depends_on = None

PAUSED = sa.text('pause_reason IS NOT NULL')


def upgrade() -> None:
    # Made only where missing: a schema made from the models has them.
    existing = {i['name'] for i in sa.inspect(op.get_bind()).get_indexes('sessions')}
    if 'ix_sessions_rank' not in existing:
        op.create_index('ix_sessions_rank', 'sessions', ['status', sa.text('precedence DESC'), 'created_at', 'id'])
    if 'ix_sessions_class_rank' not in existing:
        op.create_index(
            'ix_sessions_class_rank', 'sessions',
            ['status', 'scheduling_class', 'genesis', sa.text('precedence DESC'), 'created_at', 'id'],
        )
    if 'ix_sessions_paused' not in existing:
        op.create_index('ix_sessions_paused', 'sessions', ['status', 'paused_by'], sqlite_where=PAUSED, postgresql_where=PAUSED)


def downgrade() -> None:
    for name in ('ix_sessions_paused', 'ix_sessions_class_rank', 'ix_sessions_rank'):
        op.drop_index(name, table_name='sessions')
