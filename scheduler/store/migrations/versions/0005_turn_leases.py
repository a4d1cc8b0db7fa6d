"""a running turn's owner and lease

A turn records the process executing it and until when that process vouches for it; its
heartbeat renews the lease, and recovery takes only turns whose lease has run out. A turn left
running by an earlier version has no lease and counts as lost at the first sweep.

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

from scheduler.store.models import UTCDateTime

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('turns', sa.Column('owner', sa.String(), nullable=True))
    op.add_column('turns', sa.Column('lease_expires_at', UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('turns') as batch:
        batch.drop_column('lease_expires_at')
        batch.drop_column('owner')
