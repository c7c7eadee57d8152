"""recipes and groups: chance accuracy of a training, a run's did-not-learn flag

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("trainings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("chance_accuracy", sa.Float(), nullable=True))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("did_not_learn", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("did_not_learn")
    with op.batch_alter_table("trainings", schema=None) as batch_op:
        batch_op.drop_column("chance_accuracy")
