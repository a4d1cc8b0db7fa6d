"""a session's capacity multiplier

Seed 000: a session may author its own admission budget as a multiple of the fleet's effective
slot budget ("1.5x" of 5 slots is 7.5), recalculated on every queue pass, instead of a whole
number. NULL: no multiplier (the fleet's budget, or the whole-number `capacity`).

Revision ID: 0010
Revises: 0009
"""
import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing, as 0006 and 0007 make theirs.
    if 'capacity_multiplier' not in {c['name'] for c in sa.inspect(op.get_bind()).get_columns('sessions')}:
        op.add_column('sessions', sa.Column('capacity_multiplier', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('sessions') as batch:
        batch.drop_column('capacity_multiplier')
