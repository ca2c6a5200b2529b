"""Release 0.1.0: the state tables as `create_all` made them before migrations existed.

Revision ID: 0001
Revises:
"""

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass  # the baseline: every table of 0.1.0 is created by its module's create_all


def downgrade() -> None:
    pass
