"""the demand-aware pace switch

One operator-set switch on the policy row (issue 32, P20 item 1): with it on, the pacing curve
holds only when the window's expected demand does not fit in its spot budget left
(`scheduler.rules.demand`). On by default; audited like every policy change.

Revision ID: 0022
Revises: 0021
"""
import sqlalchemy as sa
from alembic import op

revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Skipped where it was already made: a schema made from the models has it.
    if 'demand_pacing_enabled' in {c['name'] for c in sa.inspect(op.get_bind()).get_columns('policy')}:
        return
    op.add_column('policy', sa.Column('demand_pacing_enabled', sa.Boolean(), nullable=False, server_default=sa.true()))


def downgrade() -> None:
    with op.batch_alter_table('policy') as batch:
        batch.drop_column('demand_pacing_enabled')
