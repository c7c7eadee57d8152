"""epoch_metrics.figures: an epoch's figures in one JSON object, as each technique declares them
(the columns hit_rate, density_fwd, density_bwd, gp_fraction and cosine_similarity move into
it), and per-layer densities under the same keys as the epoch's (density_x -> density_fwd,
density_grad -> density_bwd)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JsonType = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
MOVED = ("hit_rate", "density_fwd", "density_bwd", "gp_fraction", "cosine_similarity")
LAYER_KEYS = {"density_x": "density_fwd", "density_grad": "density_bwd"}


def _layer_keys(per_layer: dict[str, Any] | None, renames: dict[str, str]) -> dict[str, Any]:
    return {
        layer: {renames.get(key, key): value for key, value in figures.items()}
        for layer, figures in (per_layer or {}).items()
    }


def upgrade() -> None:
    with op.batch_alter_table("epoch_metrics", schema=None) as batch_op:
        batch_op.add_column(sa.Column("figures", JsonType, server_default="{}", nullable=False))
    epochs = sa.table(
        "epoch_metrics",
        sa.column("id", sa.Integer),
        sa.column("figures", JsonType),
        sa.column("per_layer", JsonType),
        *(sa.column(name, sa.Float) for name in MOVED),
    )
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(epochs.c.id, epochs.c.per_layer, *(epochs.c[name] for name in MOVED))
    ).all()
    for row in rows:
        figures = {name: getattr(row, name) for name in MOVED if getattr(row, name) is not None}
        connection.execute(
            epochs.update()
            .where(epochs.c.id == row.id)
            .values(figures=figures, per_layer=_layer_keys(row.per_layer, LAYER_KEYS))
        )
    with op.batch_alter_table("epoch_metrics", schema=None) as batch_op:
        for name in MOVED:
            batch_op.drop_column(name)


def downgrade() -> None:
    with op.batch_alter_table("epoch_metrics", schema=None) as batch_op:
        for name in MOVED:
            batch_op.add_column(sa.Column(name, sa.Float(), nullable=True))
    epochs = sa.table(
        "epoch_metrics",
        sa.column("id", sa.Integer),
        sa.column("figures", JsonType),
        sa.column("per_layer", JsonType),
        *(sa.column(name, sa.Float) for name in MOVED),
    )
    connection = op.get_bind()
    back = {new: old for old, new in LAYER_KEYS.items()}
    for row in connection.execute(
        sa.select(epochs.c.id, epochs.c.figures, epochs.c.per_layer)
    ).all():
        figures = row.figures or {}
        connection.execute(
            epochs.update()
            .where(epochs.c.id == row.id)
            .values(
                per_layer=_layer_keys(row.per_layer, back),
                **{name: figures.get(name) for name in MOVED},
            )
        )
    with op.batch_alter_table("epoch_metrics", schema=None) as batch_op:
        batch_op.drop_column("figures")
