"""a temporary max sessions

Seed 000: an operator may put a temporary value on max sessions, in force until its expiry (or
until cleared), after which the configured value is in force again. Both columns are NULL when
no temporary value is in force.

Revision ID: 0012
Revises: 0011
"""
import sqlalchemy as sa
from alembic import op

import scheduler.store.models

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing, as 0006 onwards make theirs: a schema made from the models has them.
    present = {c['name'] for c in sa.inspect(op.get_bind()).get_columns('policy')}
    if 'max_sessions_override' not in present:
        op.add_column('policy', sa.Column('max_sessions_override', sa.Integer(), nullable=True))
    if 'max_sessions_override_until' not in present:
        op.add_column('policy', sa.Column('max_sessions_override_until', scheduler.store.models.UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('policy') as batch:
        batch.drop_column('max_sessions_override_until')
        batch.drop_column('max_sessions_override')
