"""the early notice that a window's spot budget runs out

One row per running spot session and window, naming the window instance (its reset) it was told
about, so a restart or another replica does not tell it again before that window rolls over.

Revision ID: 0015
Revises: 0014
"""
import sqlalchemy as sa
from alembic import op

from scheduler.store.models import UTCDateTime

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing, as 0006 onwards make theirs: a schema made from the models has it.
    if not sa.inspect(op.get_bind()).has_table('budget_notices'):
        op.create_table(
            'budget_notices',
            sa.Column('session_id', sa.Integer(), nullable=False),
            sa.Column('window', sa.String(), nullable=False),
            sa.Column('resets_at', UTCDateTime(timezone=True), nullable=False),
            sa.Column('runs_out_at', UTCDateTime(timezone=True), nullable=False),
            sa.Column('sent_at', UTCDateTime(timezone=True), nullable=False),
            sa.PrimaryKeyConstraint('session_id', 'window'),
        )


def downgrade() -> None:
    op.drop_table('budget_notices')
