"""idempotency keys of POST /api/v1/sessions

A client that retries a create after a lost answer sends the same `Idempotency-Key`; the row,
written with the session, makes the retry answer with that session instead of a second one.

Revision ID: 0017
Revises: 0016
"""
import sqlalchemy as sa
from alembic import op

from scheduler.store.models import UTCDateTime

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Made only where missing, as 0006 onwards make theirs: a schema made from the models has it.
    if sa.inspect(op.get_bind()).has_table('idempotency_keys'):
        return
    op.create_table(
        'idempotency_keys',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('caller', sa.String(), nullable=False),
        sa.Column('key', sa.String(), nullable=False),
        sa.Column('fingerprint', sa.String(), nullable=False),
        sa.Column('session_id', sa.Integer(), nullable=False),
        sa.Column('answer', sa.JSON(), nullable=True),
        sa.Column('created_at', UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['session_id'], ['sessions.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('caller', 'key'),
    )
    with op.batch_alter_table('idempotency_keys') as batch:
        batch.create_index(batch.f('ix_idempotency_keys_created_at'), ['created_at'], unique=False)


def downgrade() -> None:
    op.drop_table('idempotency_keys')
