"""runs.seconds, runs.seconds_per_step and runs.area_mm2: a run's time on its accelerator (the
whole training and one training step) and the accelerator's area, as measures of their own

A done run's `seconds` is filled in from its stored summary (the simulator's totals always held
it). `seconds_per_step` needs the training's iteration count and `area_mm2` the area model; both
stay empty for runs done before this revision until they are simulated again.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JsonType = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
BATCH = 500  # rows read per query, so a large runs table is never held in memory at once
COLUMNS = ("seconds", "seconds_per_step", "area_mm2")

runs = sa.table(
    "runs",
    sa.column("id", sa.Integer),
    sa.column("summary", JsonType),
    sa.column("seconds", sa.Float),
)


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        for name in COLUMNS:
            batch_op.add_column(sa.Column(name, sa.Float(), nullable=True))
    connection = op.get_bind()
    last = 0
    while True:
        rows = connection.execute(
            sa.select(runs.c.id, runs.c.summary)
            .where(runs.c.id > last, runs.c.summary.is_not(None))
            .order_by(runs.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        last = rows[-1].id
        for row in rows:
            seconds = (row.summary or {}).get("seconds")
            if isinstance(seconds, int | float):
                connection.execute(
                    runs.update().where(runs.c.id == row.id).values(seconds=float(seconds))
                )


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        for name in COLUMNS:
            batch_op.drop_column(name)
