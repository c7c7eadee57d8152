"""runs.group_key: the seed-group key stored with each run (backend.analysis.groups.group_key of
its training config without the seed, technique settings, accelerator config and baseline
hardware), indexed, so that the database groups runs by it; existing runs are backfilled

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from backend.analysis.groups import group_key

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JsonType = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
BATCH = 1000


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("group_key", sa.String(length=32), nullable=True))
    runs = sa.table(
        "runs",
        sa.column("id", sa.Integer),
        sa.column("group_key", sa.String),
        sa.column("training_config", JsonType),
        sa.column("technique_params", JsonType),
        sa.column("accelerator_config", JsonType),
        sa.column("baseline_hardware", sa.String),
    )
    connection = op.get_bind()
    last = 0
    while True:  # in batches by id: a large table is never held in memory whole
        rows = connection.execute(
            sa.select(
                runs.c.id,
                runs.c.training_config,
                runs.c.technique_params,
                runs.c.accelerator_config,
                runs.c.baseline_hardware,
            )
            .where(runs.c.id > last)
            .order_by(runs.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        connection.execute(
            runs.update().where(runs.c.id == sa.bindparam("run_id")),
            [
                {
                    "run_id": row.id,
                    "group_key": group_key(
                        row.training_config,
                        row.technique_params,
                        row.accelerator_config,
                        row.baseline_hardware,
                    ),
                }
                for row in rows
            ],
        )
        last = rows[-1].id
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.alter_column("group_key", existing_type=sa.String(length=32), nullable=False)
        batch_op.create_index("ix_runs_group_key", ["group_key"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_group_key")
        batch_op.drop_column("group_key")
