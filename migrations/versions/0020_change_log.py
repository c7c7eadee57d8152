"""change_log: which transactions wrote, by topic, kept by a statement-level trigger on every
table (PostgreSQL; backend/db/change_log.py); the marker read caches are keyed on. A table
added later gets the trigger in its own migration (`change_log.watch`).

Revision ID: 0020_change_log
Revises: 0019
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from backend.db import change_log

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WATCHED = (
    "users", "teams", "team_memberships", "api_tokens", "experiments", "trainings", "runs",
    "layer_results", "epoch_metrics", "dashboards", "share_links", "user_sessions",
    "login_throttles", "team_invitations", "worker_heartbeats", "run_attempts",
    "design_searches", "search_chunks", "saved_accelerators",
)  # fmt: skip


def upgrade() -> None:
    op.create_table(
        "change_log",
        sa.Column("topic", sa.String(length=40), nullable=False),
        sa.Column("xid", sa.BigInteger(), nullable=False),
        sa.Column("weight", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("topic", "xid", name=op.f("pk_change_log")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(change_log.FUNCTION_DDL)
        for table in WATCHED:
            op.execute(change_log.watch(table))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in WATCHED:
            op.execute(change_log.unwatch(table))
        op.execute(f"DROP FUNCTION IF EXISTS {change_log.TRIGGER_FUNCTION}()")
    op.drop_table("change_log")
