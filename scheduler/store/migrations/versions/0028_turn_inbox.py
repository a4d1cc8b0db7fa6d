"""a running agent that listens

Talk to a running agent (issue 31, P19 item 3): a turn whose agent takes streamed input is
marked listening until it answers, so a message sent meanwhile is handed to it mid-turn.

Revision ID: 0028
Revises: 0027
"""
import sqlalchemy as sa
from alembic import op

revision = '0028'
down_revision = '0027'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing, as 0006 onwards make theirs: a schema made from the models has them.
    bind = op.get_bind()
    turns = {c['name'] for c in sa.inspect(bind).get_columns('turns')}
    if 'listening' not in turns:
        with op.batch_alter_table('turns') as batch:
            batch.add_column(sa.Column('listening', sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table('turns') as batch:
        batch.drop_column('listening')
