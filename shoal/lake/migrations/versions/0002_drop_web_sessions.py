"""Console sessions moved to `shoal_sessions` (hashed ids, API-token link, expiry): drop the
earlier `shoal_web_sessions`, which nothing reads; its sessions were already refused.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("shoal_web_sessions"):
        op.drop_table("shoal_web_sessions")


def downgrade() -> None:
    pass  # the table held only sign-in sessions, which a downgrade would not honour either
