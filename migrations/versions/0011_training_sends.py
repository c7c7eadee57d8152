"""trainings.sent_at and trainings.sends: when the training's last message went to the broker
and how many were sent since it last became queued; the reconciler re-sends an overdue one from
these instead of reading the broker's storage

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Trainings queued before this revision have no send recorded: the reconciler counts their
    # wait from created_at and sends them once that is older than its interval.
    with op.batch_alter_table("trainings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("sends", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("trainings", schema=None) as batch_op:
        batch_op.drop_column("sends")
        batch_op.drop_column("sent_at")
