"""repositories in lower case

GitHub's names are case-insensitive, and a session's repository is a key (its mirror, its
concurrency group `repo:owner/name`): `scheduler.bounds.check_repository` now keeps it in lower
case, so `ACME/API` and `acme/api` are one repository. The rows written before take the same form.

Revision ID: 0016
Revises: 0015
"""
from alembic import op

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "UPDATE sessions SET concurrency_group = lower(concurrency_group)"
        " WHERE concurrency_group IS NOT NULL AND lower(concurrency_group) = 'repo:' || lower(repository)"
    )
    op.execute("UPDATE sessions SET repository = lower(repository) WHERE repository IS NOT NULL AND repository <> lower(repository)")


def downgrade() -> None:
    pass  # the spelling before is not kept, and lower case names the same repositories
