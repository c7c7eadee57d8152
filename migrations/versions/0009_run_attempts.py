"""run attempts: a failed or cancelled run can be retried, its earlier attempts kept

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("attempt", sa.Integer(), server_default="1", nullable=False))
    with op.batch_alter_table("trainings", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("attempts_at_retry", sa.Integer(), server_default="0", nullable=False)
        )

    op.create_table(
        "run_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column(
            "retried_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("retried_by", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["retried_by"],
            ["users.id"],
            name=op.f("fk_run_attempts_retried_by_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_attempts_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_attempts")),
        sa.UniqueConstraint("run_id", "attempt", name=op.f("uq_run_attempts_run_id")),
    )


def downgrade() -> None:
    op.drop_table("run_attempts")
    with op.batch_alter_table("trainings", schema=None) as batch_op:
        batch_op.drop_column("attempts_at_retry")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("attempt")
