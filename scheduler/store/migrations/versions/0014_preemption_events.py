"""a ledger of preemption events

`sessions.preemption_count` counts a session's preemptions over its life and
`last_preempted_at` keeps only the latest, so neither can say how many fell in the last day
or which session took the slot each time. One row per charged preemption can: what the
cycling report (`scheduler.rules.cycling`) reads.

Revision ID: 0014
Revises: 0013
"""
import sqlalchemy as sa
from alembic import op

import scheduler.store.models

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing, as 0006 onwards make theirs: a schema made from the models has it.
    if sa.inspect(op.get_bind()).has_table('preemption_events'):
        return
    op.create_table('preemption_events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('session_id', sa.Integer(), nullable=False),
    sa.Column('by_id', sa.Integer(), nullable=True),
    sa.Column('turn_id', sa.Integer(), nullable=True),
    sa.Column('at', scheduler.store.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('halted', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('preemption_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_preemption_events_session_id'), ['session_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_preemption_events_at'), ['at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('preemption_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_preemption_events_at'))
        batch_op.drop_index(batch_op.f('ix_preemption_events_session_id'))
    op.drop_table('preemption_events')
