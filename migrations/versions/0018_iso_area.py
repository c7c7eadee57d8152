"""runs.stall_share, runs.iso_area_speedup, runs.iso_area_energy_ratio and runs.iso_area: a run's
share of cycles spent waiting on DRAM, and its comparison with the best dense designs of no more
area (backend/sim/iso_area.py) with those designs

A done run's `stall_share` is filled in from its stored cycles. The iso-area figures need the
simulator: they stay empty for runs done before this revision until they are simulated again.

Revision ID: 0017_iso_area
Revises: 0016
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JsonType = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
FLOAT_COLUMNS = ("stall_share", "iso_area_speedup", "iso_area_energy_ratio")

runs = sa.table(
    "runs",
    sa.column("stall_cycles", sa.BigInteger),
    sa.column("total_cycles", sa.BigInteger),
    sa.column("stall_share", sa.Float),
)


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        for name in FLOAT_COLUMNS:
            batch_op.add_column(sa.Column(name, sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("iso_area", JsonType, nullable=True))
    op.get_bind().execute(
        runs.update()
        .where(runs.c.total_cycles > 0, runs.c.stall_cycles.is_not(None))
        .values(stall_share=sa.cast(runs.c.stall_cycles, sa.Float) / runs.c.total_cycles)
    )


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("iso_area")
        for name in FLOAT_COLUMNS:
            batch_op.drop_column(name)
