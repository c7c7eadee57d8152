"""epoch_metrics.wall_seconds: the wall time of a whole epoch (evaluation included), stored as
each epoch is measured, from which a running training's time left is estimated

Epochs stored before this revision keep it empty.

Revision ID: 0017_live_epochs
Revises: 0016
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("epoch_metrics", schema=None) as batch_op:
        batch_op.add_column(sa.Column("wall_seconds", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("epoch_metrics", schema=None) as batch_op:
        batch_op.drop_column("wall_seconds")
