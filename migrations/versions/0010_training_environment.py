"""trainings.environment: the PyTorch build, intra-op threads and CPU instruction set a training
ran with (its results are bit-identical only under the same)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JsonType = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("trainings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("environment", JsonType, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trainings", schema=None) as batch_op:
        batch_op.drop_column("environment")
