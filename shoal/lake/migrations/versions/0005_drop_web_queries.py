"""Console SQL history moved to `shoal_console_queries` (random ids, the kept result of each
statement): drop the earlier `shoal_web_queries`, whose sequential ids the console re-ran on
every view. Its entries held no results, so there is nothing to carry over.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("shoal_web_queries"):
        op.drop_table("shoal_web_queries")


def downgrade() -> None:
    pass  # an older console would recreate its own (empty) table
