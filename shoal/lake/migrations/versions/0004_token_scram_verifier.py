"""API tokens keep a SCRAM-SHA-256 verifier for the PostgreSQL endpoint: `shoal_tokens.scram_verifier`.

Tokens made before this revision have none (the secret was never stored, so none can be
computed): they sign in to the PostgreSQL endpoint with a password message inside TLS only.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table("shoal_tokens"):
        return  # a new install: create_all makes the table with the column
    if "scram_verifier" not in {c["name"] for c in inspector.get_columns("shoal_tokens")}:
        with op.batch_alter_table("shoal_tokens") as batch:
            batch.add_column(sa.Column("scram_verifier", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("shoal_tokens") as batch:
        batch.drop_column("scram_verifier")
