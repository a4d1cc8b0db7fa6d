"""the turns a session spent fixing its pull request's failed checks

A failed check on the pull request Pacer opened becomes the session's next turn, up to
PACER_FIX_BUDGET of them (issue 31, P19 item 4); the count is kept on the session's row, so a
restart or another replica does not give it a fresh budget.

Revision ID: 0025
Revises: 0024
"""
import sqlalchemy as sa
from alembic import op

revision = '0025'
down_revision = '0024'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing, as 0006 onwards make theirs: a schema made from the models has it.
    if 'fix_attempts' in {c['name'] for c in sa.inspect(op.get_bind()).get_columns('sessions')}:
        return
    op.add_column('sessions', sa.Column('fix_attempts', sa.Integer(), nullable=False, server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('sessions') as batch:
        batch.drop_column('fix_attempts')
