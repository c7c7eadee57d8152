"""tags and notes on experiments and runs

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JsonType = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    for table in ("experiments", "runs"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("tags", JsonType, server_default="[]", nullable=False))
            batch_op.add_column(sa.Column("notes", sa.Text(), server_default="", nullable=False))


def downgrade() -> None:
    for table in ("experiments", "runs"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("notes")
            batch_op.drop_column("tags")
