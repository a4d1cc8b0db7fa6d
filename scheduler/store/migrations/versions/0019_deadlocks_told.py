"""the hold deadlocks an operator hold has told people of

A hold deadlock is told once (the ops channel and the two sessions' threads): the pairs told are
kept on the hold's row, so neither another process nor a restart tells them again.

Revision ID: 0019
Revises: 0018
"""
import sqlalchemy as sa
from alembic import op

revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing, as 0006 onwards make theirs: a schema made from the models has it.
    if 'deadlocks_told' in {c['name'] for c in sa.inspect(op.get_bind()).get_columns('operator_holds')}:
        return
    with op.batch_alter_table('operator_holds') as batch:
        batch.add_column(sa.Column('deadlocks_told', sa.JSON(), nullable=False, server_default='[]'))


def downgrade() -> None:
    with op.batch_alter_table('operator_holds') as batch:
        batch.drop_column('deadlocks_told')
