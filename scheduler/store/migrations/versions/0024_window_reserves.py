"""a reserve of its own for each per-model weekly bucket

A map on the policy row (issue 30, P18 item 3): a per-model weekly bucket the provider counts
apart ("7d_opus") -> its reserve in percent. A bucket not in it keeps its kind's default, the
weekly reserve. Audited like every policy change.

Revision ID: 0024
Revises: 0023
"""
import sqlalchemy as sa
from alembic import op

revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Skipped where it was already made: a schema made from the models has it.
    if 'window_reserves' in {c['name'] for c in sa.inspect(op.get_bind()).get_columns('policy')}:
        return
    op.add_column('policy', sa.Column('window_reserves', sa.JSON(), nullable=False, server_default=sa.text("'{}'")))


def downgrade() -> None:
    with op.batch_alter_table('policy') as batch:
        batch.drop_column('window_reserves')
