"""a session's repository

A session may name the repository ("owner/name") its turns work in: a worktree of it becomes the
runner's working directory, and its commits go back as a branch and a pull request.

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('sessions', sa.Column('repository', sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('sessions') as batch:
        batch.drop_column('repository')
