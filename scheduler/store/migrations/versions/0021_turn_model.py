"""the model a turn ran

The burn table's rates are per runtime and model (seed 001, "Read the $/min of each harness + model
combination"): a turn keeps the model its runner said it ran, and the burn index covers it, so the
latest turns of a runtime are still read from index entries only.

Revision ID: 0021
Revises: 0020
"""
import sqlalchemy as sa
from alembic import op

revision = '0021'
down_revision = '0020'
branch_labels = None
depends_on = None

BURN = ['runtime', 'finished_at', 'cost_usd', 'duration_ms']


def upgrade() -> None:
    # Made only where missing, as 0006 onwards make theirs: a schema made from the models has it.
    inspector = sa.inspect(op.get_bind())
    if 'model' not in {c['name'] for c in inspector.get_columns('turns')}:
        with op.batch_alter_table('turns') as batch:
            batch.add_column(sa.Column('model', sa.String(), nullable=True))
    burn = next((i for i in inspector.get_indexes('turns') if i['name'] == 'ix_turns_burn'), None)
    if burn is None or list(burn['column_names']) != [*BURN, 'model']:
        if burn is not None:
            op.drop_index('ix_turns_burn', table_name='turns')
        op.create_index('ix_turns_burn', 'turns', [*BURN, 'model'])


def downgrade() -> None:
    op.drop_index('ix_turns_burn', table_name='turns')
    op.create_index('ix_turns_burn', 'turns', BURN)
    with op.batch_alter_table('turns') as batch:
        batch.drop_column('model')
