"""run sort indexes: ascending indexes on energy and cycles (speedup and accuracy had them), and
on PostgreSQL the four headline figures descending with NULLS LAST, as the run list sorts them
(backend/db/sort_indexes.py), so that a page is read off an index instead of sorting every run.

Revision ID: 0021_sort_indexes
Revises: 0020
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

from backend.db import sort_indexes

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_runs_energy_pj", "runs", ["energy_pj"])
    op.create_index("ix_runs_total_cycles", "runs", ["total_cycles"])
    if op.get_bind().dialect.name == "postgresql":
        sort_indexes.create(op.execute)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        sort_indexes.drop(op.execute)
    op.drop_index("ix_runs_total_cycles", table_name="runs")
    op.drop_index("ix_runs_energy_pj", table_name="runs")
