"""who opened the App Home

Pacer republishes the App Home of the people who opened it recently when the queue moves. The
list is a table rather than a process's memory: any replica may move the queue, and a person's
app_home_opened reaches whichever replica Slack picked.

Revision ID: 0008
Revises: 0007
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op

import scheduler.store.models

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing, as 0006 and 0007 make theirs: a schema made from the models has it.
    if sa.inspect(op.get_bind()).has_table('slack_home_viewers'):
        return
    op.create_table('slack_home_viewers',
    sa.Column('user_id', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('opened_at', scheduler.store.models.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('user_id')
    )
    with op.batch_alter_table('slack_home_viewers', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_slack_home_viewers_opened_at'), ['opened_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('slack_home_viewers', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_slack_home_viewers_opened_at'))
    op.drop_table('slack_home_viewers')
