"""design searches, their chunks, and users' saved accelerators

design_searches: a hardware design search of an experiment (spec, status, the merged result so
far, the searched fields of the designs it keeps, the front designs' configs); search_chunks: the
designs [start, stop) one task evaluates, leased like a training; saved_accelerators: a user's
own accelerator presets (a full config under a name, perhaps from a search's front).

Revision ID: 0017_design_search
Revises: 0016
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "design_searches",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column(
            "spec",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("designs", sa.BigInteger(), nullable=True),
        sa.Column(
            "trainings",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "result",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "design_fields",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "front_designs",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["created_by"],
            ["users.id"],
            name=op.f("fk_design_searches_created_by_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_design_searches_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_design_searches")),
    )
    with op.batch_alter_table("design_searches", schema=None) as batch_op:
        batch_op.create_index("ix_design_searches_experiment", ["experiment_id"], unique=False)
        batch_op.create_index("ix_design_searches_status", ["status"], unique=False)

    op.create_table(
        "saved_accelerators",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column(
            "config",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("search_id", sa.Integer(), nullable=True),
        sa.Column("design_index", sa.BigInteger(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["owner_id"],
            ["users.id"],
            name=op.f("fk_saved_accelerators_owner_id_users"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["search_id"],
            ["design_searches.id"],
            name=op.f("fk_saved_accelerators_search_id_design_searches"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_saved_accelerators")),
        sa.UniqueConstraint("owner_id", "name", name=op.f("uq_saved_accelerators_owner_id")),
    )
    op.create_table(
        "search_chunks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("search_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("start", sa.BigInteger(), nullable=False),
        sa.Column("stop", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=True),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("sends", sa.Integer(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("leased_by", sa.String(length=255), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["search_id"],
            ["design_searches.id"],
            name=op.f("fk_search_chunks_search_id_design_searches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_search_chunks")),
        sa.UniqueConstraint("search_id", "position", name=op.f("uq_search_chunks_search_id")),
    )
    with op.batch_alter_table("search_chunks", schema=None) as batch_op:
        batch_op.create_index("ix_search_chunks_status", ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("search_chunks", schema=None) as batch_op:
        batch_op.drop_index("ix_search_chunks_status")

    op.drop_table("search_chunks")
    op.drop_table("saved_accelerators")
    with op.batch_alter_table("design_searches", schema=None) as batch_op:
        batch_op.drop_index("ix_design_searches_status")
        batch_op.drop_index("ix_design_searches_experiment")

    op.drop_table("design_searches")
