"""cost budgets per runtime, and when each runtime's spend was last reset

Seed 002's cost budget: an operator sets US dollars per runtime on the policy row, and the spend
that counts against it is the turns' recorded cost since that runtime's last reset.

Revision ID: 0009
Revises: 0008
"""
import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing, as 0006, 0007 and 0008 make theirs: a schema made from the models has them.
    present = {c['name'] for c in sa.inspect(op.get_bind()).get_columns('policy')}
    for name in ('cost_budgets', 'spend_reset_at'):
        if name not in present:
            op.add_column('policy', sa.Column(name, sa.JSON(), nullable=False, server_default=sa.text("'{}'")))


def downgrade() -> None:
    with op.batch_alter_table('policy') as batch:
        batch.drop_column('spend_reset_at')
        batch.drop_column('cost_budgets')
