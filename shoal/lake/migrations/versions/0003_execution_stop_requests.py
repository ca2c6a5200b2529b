"""Executions can be stopped from another process: `shoal_executions.stop_requested`.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table("shoal_executions"):
        return  # a new install: create_all makes the table with the column
    if "stop_requested" not in {c["name"] for c in inspector.get_columns("shoal_executions")}:
        with op.batch_alter_table("shoal_executions") as batch:
            batch.add_column(sa.Column("stop_requested", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("shoal_executions") as batch:
        batch.drop_column("stop_requested")
