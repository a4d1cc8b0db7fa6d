"""spacing buckets: hourly budgets of calls shared by every process

Issue 31, P19 item 1: the progress edits on GitHub's status comments and Slack's messages were
bounded an hour per process, so N worker processes could make N times the bound; one row per
budget here is taken from in a transaction by every process (`scheduler/store/buckets.py`).

Revision ID: 0030
Revises: 0029
"""
import sqlalchemy as sa
from alembic import op

revision = '0030'
down_revision = '0029'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing: a schema made from the models has it.
    if sa.inspect(op.get_bind()).has_table('spacing_buckets'):
        return
    op.create_table(
        'spacing_buckets',
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('tokens', sa.Float(), nullable=False),
        sa.Column('filled_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('name'),
    )


def downgrade() -> None:
    op.drop_table('spacing_buckets')
