"""provider readings: the latest word of each quota window, per account

The agents print the provider's own figures while a turn runs; a turn may run on a `pacer
worker` process, so the reading is kept where the deciding process reads it.

Revision ID: 0020
Revises: 0019
"""
import sqlalchemy as sa
from alembic import op

from scheduler.store.models import UTCDateTime

revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing, as 0006 onwards make theirs: a schema made from the models has it.
    if sa.inspect(op.get_bind()).has_table('provider_readings'):
        return
    op.create_table(
        'provider_readings',
        sa.Column('account', sa.String(), nullable=False),
        sa.Column('kind', sa.String(), nullable=False),
        sa.Column('provider', sa.String(), nullable=False),
        sa.Column('status', sa.String(), nullable=True),
        sa.Column('utilization', sa.Float(), nullable=True),
        sa.Column('resets_at', UTCDateTime(timezone=True), nullable=True),
        sa.Column('is_using_overage', sa.Boolean(), nullable=True),
        sa.Column('overage_status', sa.String(), nullable=True),
        sa.Column('observed_at', UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('account', 'kind'),
    )


def downgrade() -> None:
    op.drop_table('provider_readings')
