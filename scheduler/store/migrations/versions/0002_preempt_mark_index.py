"""index the preemption marks

A mark is rare and short-lived, and three readers ask for the marked rows every few minutes —
the ceiling sweep's resolve_marks, the paused figures on every card, and the simulator's
per-minute sample. Without an index each is a scan of every session ever created; the index is
partial, so it holds only the marked rows.

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    marked = sa.text('preempt_mark_at IS NOT NULL')
    op.create_index('ix_sessions_preempt_mark', 'sessions', ['preempt_mark_at'], sqlite_where=marked, postgresql_where=marked)


def downgrade() -> None:
    op.drop_index('ix_sessions_preempt_mark', table_name='sessions')
