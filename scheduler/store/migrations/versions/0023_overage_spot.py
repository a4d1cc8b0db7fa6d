"""the overage switch

One operator-set switch on the policy row (issue 30, P18 item 4): whether spot work may run on the
provider's overage (extra usage, money beyond the plan), counted as spend like any other, or is
refused it until the window resets. Off (refused) by default; audited like every policy change.

Revision ID: 0023
Revises: 0022
"""
import sqlalchemy as sa
from alembic import op

revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Skipped where it was already made: a schema made from the models has it.
    if 'overage_spot_enabled' in {c['name'] for c in sa.inspect(op.get_bind()).get_columns('policy')}:
        return
    op.add_column('policy', sa.Column('overage_spot_enabled', sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table('policy') as batch:
        batch.drop_column('overage_spot_enabled')
