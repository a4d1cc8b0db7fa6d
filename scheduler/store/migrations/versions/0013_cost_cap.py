"""a session's cost cap

A session may carry a cap in US dollars on what its turns cost together (`scheduler.holds.cost_caps`):
a turn is not started once the spend has reached it, and a running one is halted when the burn
estimate says it has. NULL: no cap.

Revision ID: 0013
Revises: 0012
"""
import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing, as 0010 makes its column.
    if 'cost_cap_usd' not in {c['name'] for c in sa.inspect(op.get_bind()).get_columns('sessions')}:
        op.add_column('sessions', sa.Column('cost_cap_usd', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('sessions') as batch:
        batch.drop_column('cost_cap_usd')
