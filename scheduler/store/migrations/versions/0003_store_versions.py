"""count writes to the kept stores

Reads kept across transactions (the policy, which hold stores have rows, the watched session
states) are reused only while their tables are at the version they were read at. The counters
are bumped by triggers, so a write from any process, ORM or raw statement, is counted.

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

from scheduler.store.versions import ddl, drop_ddl

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'store_versions',
        sa.Column('name', sa.String(), nullable=False),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('name'),
    )
    dialect = op.get_bind().dialect.name
    for statement in ddl(dialect):
        op.execute(sa.text(statement))


def downgrade() -> None:
    for statement in drop_ddl(op.get_bind().dialect.name):
        op.execute(sa.text(statement))
    op.drop_table('store_versions')
