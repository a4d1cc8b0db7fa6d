"""the backlog top-up ceiling

Three operator-set thresholds on the policy row (the top-up ceiling, its stretch and its
cooldown) and a one-row table for the top-up sweep's own state (when the fleet went under its
ceiling, when the event last fired), which the sweep writes and the audit leaves out.

Revision ID: 0011
Revises: 0010
"""
import sqlalchemy as sa
from alembic import op

from scheduler.store.models import UTCDateTime

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Each step is skipped where it was already made, so a database stamped back to an older
    # revision upgrades through it.
    inspector = sa.inspect(op.get_bind())
    present = {c['name'] for c in inspector.get_columns('policy')}
    for name, default in (('top_up_ceiling', '3'), ('top_up_stretch_minutes', '0'), ('top_up_cooldown_minutes', '30')):
        if name not in present:
            op.add_column('policy', sa.Column(name, sa.Integer(), nullable=False, server_default=default))
    if not inspector.has_table('top_up_state'):
        op.create_table(
            'top_up_state',
            sa.Column('id', sa.Integer(), nullable=False),
            sa.Column('under_since', UTCDateTime(timezone=True), nullable=True),
            sa.Column('fired_at', UTCDateTime(timezone=True), nullable=True),
            sa.PrimaryKeyConstraint('id'),
        )


def downgrade() -> None:
    op.drop_table('top_up_state')
    with op.batch_alter_table('policy') as batch:
        batch.drop_column('top_up_cooldown_minutes')
        batch.drop_column('top_up_stretch_minutes')
        batch.drop_column('top_up_ceiling')
