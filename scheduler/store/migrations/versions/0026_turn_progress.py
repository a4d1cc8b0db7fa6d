"""what a running turn's agent is doing

Live progress (issue 31, P19 item 1): the runner reads the tool in use, the agent's todo list and
its cost so far from the agent's stream; the latest of them is kept on the turn's row with when it
was read, so the live page, the API and the leader of another process read it, and the Slack
message that shows it (its ts) is kept beside it, to be edited in place.

Revision ID: 0026
Revises: 0025
"""
import sqlalchemy as sa
from alembic import op

from scheduler.store.models import UTCDateTime

revision = '0026'
down_revision = '0025'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing, as 0006 onwards make theirs: a schema made from the models has them.
    present = {c['name'] for c in sa.inspect(op.get_bind()).get_columns('turns')}
    with op.batch_alter_table('turns') as batch:
        if 'progress' not in present:
            batch.add_column(sa.Column('progress', sa.JSON(), nullable=True))
        if 'progress_at' not in present:
            batch.add_column(sa.Column('progress_at', UTCDateTime(), nullable=True))
        if 'progress_message' not in present:
            batch.add_column(sa.Column('progress_message', sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('turns') as batch:
        batch.drop_column('progress_message')
        batch.drop_column('progress_at')
        batch.drop_column('progress')
