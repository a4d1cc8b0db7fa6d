"""session forecasts: each waiting session's expected start and its range

Issue 32, P20 item 2: a refresh on the leader runs the queue forward and keeps one row per
waiting session here, so every process's views (why, the API, the status comment) read it
without computing it on a request's path.

Revision ID: 0027
Revises: 0026
"""
import sqlalchemy as sa
from alembic import op

from scheduler.store.columns import UTCDateTime

revision = '0027'
down_revision = '0026'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing: a schema made from the models has it.
    if sa.inspect(op.get_bind()).has_table('session_forecasts'):
        return
    op.create_table(
        'session_forecasts',
        sa.Column('session_id', sa.Integer(), nullable=False),
        sa.Column('median', UTCDateTime(timezone=True), nullable=False),
        sa.Column('low', UTCDateTime(timezone=True), nullable=False),
        sa.Column('high', UTCDateTime(timezone=True), nullable=True),
        sa.Column('draws', sa.Integer(), nullable=False),
        sa.Column('computed_at', UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('session_id'),
    )


def downgrade() -> None:
    op.drop_table('session_forecasts')
