"""Initial schema: accounts, teams, experiments, trainings, runs, results, dashboards.

Revision ID: 0001
Revises:
Create Date: 2026-12-02 16:34:32.793524
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# JSONB on PostgreSQL, JSON text on SQLite: the models' JsonType.
JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "teams",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_teams")),
        sa.UniqueConstraint("name", name=op.f("uq_teams_name")),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("display_name", sa.String(length=120), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=True),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("email", name=op.f("uq_users_email")),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_api_tokens_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_tokens_user_id"), ["user_id"], unique=False)

    op.create_table(
        "dashboards",
        sa.Column("id", sa.String(length=16), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=True),
        sa.Column("team_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("config", JSON_TYPE, nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["owner_id"],
            ["users.id"],
            name=op.f("fk_dashboards_owner_id_users"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_dashboards_team_id_teams"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dashboards")),
    )
    with op.batch_alter_table("dashboards", schema=None) as batch_op:
        batch_op.create_index("ix_dashboards_owner", ["owner_id"], unique=False)
        batch_op.create_index("ix_dashboards_team", ["team_id"], unique=False)

    op.create_table(
        "experiments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=True),
        sa.Column("team_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("spec", JSON_TYPE, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_id"],
            ["users.id"],
            name=op.f("fk_experiments_owner_id_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["team_id"],
            ["teams.id"],
            name=op.f("fk_experiments_team_id_teams"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_experiments")),
    )
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.create_index(
            "ix_experiments_owner_created", ["owner_id", "created_at"], unique=False
        )
        batch_op.create_index(
            "ix_experiments_team_created", ["team_id", "created_at"], unique=False
        )

    op.create_table(
        "team_memberships",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["team_id"],
            ["teams.id"],
            name=op.f("fk_team_memberships_team_id_teams"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_team_memberships_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_team_memberships")),
        sa.UniqueConstraint("team_id", "user_id", name=op.f("uq_team_memberships_team_id")),
    )
    with op.batch_alter_table("team_memberships", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_team_memberships_user_id"), ["user_id"], unique=False)

    op.create_table(
        "share_links",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dashboard_id", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["created_by"],
            ["users.id"],
            name=op.f("fk_share_links_created_by_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["dashboard_id"],
            ["dashboards.id"],
            name=op.f("fk_share_links_dashboard_id_dashboards"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_share_links")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_share_links_token_hash")),
    )
    with op.batch_alter_table("share_links", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_share_links_dashboard_id"), ["dashboard_id"], unique=False
        )

    op.create_table(
        "trainings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("technique", sa.String(length=64), nullable=False),
        sa.Column("technique_params", JSON_TYPE, nullable=False),
        sa.Column("training_config", JSON_TYPE, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("task_id", sa.String(length=64), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("workload", JSON_TYPE, nullable=True),
        sa.Column("test_accuracy", sa.Float(), nullable=True),
        sa.Column("test_loss", sa.Float(), nullable=True),
        sa.Column("wall_seconds", sa.Float(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_trainings_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trainings")),
        sa.UniqueConstraint("experiment_id", "key", name=op.f("uq_trainings_experiment_id")),
    )
    with op.batch_alter_table("trainings", schema=None) as batch_op:
        batch_op.create_index("ix_trainings_status", ["status"], unique=False)

    op.create_table(
        "epoch_metrics",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("training_id", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("train_loss", sa.Float(), nullable=True),
        sa.Column("train_accuracy", sa.Float(), nullable=True),
        sa.Column("test_loss", sa.Float(), nullable=True),
        sa.Column("test_accuracy", sa.Float(), nullable=True),
        sa.Column("hit_rate", sa.Float(), nullable=True),
        sa.Column("density_fwd", sa.Float(), nullable=True),
        sa.Column("density_bwd", sa.Float(), nullable=True),
        sa.Column("gp_fraction", sa.Float(), nullable=True),
        sa.Column("cosine_similarity", sa.Float(), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=True),
        sa.Column("per_layer", JSON_TYPE, nullable=False),
        sa.ForeignKeyConstraint(
            ["training_id"],
            ["trainings.id"],
            name=op.f("fk_epoch_metrics_training_id_trainings"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_epoch_metrics")),
        sa.UniqueConstraint("training_id", "epoch", name=op.f("uq_epoch_metrics_training_id")),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("training_id", sa.Integer(), nullable=True),
        sa.Column("baseline_run_id", sa.Integer(), nullable=True),
        sa.Column("is_baseline", sa.Boolean(), nullable=False),
        sa.Column("technique", sa.String(length=64), nullable=False),
        sa.Column("technique_params", JSON_TYPE, nullable=False),
        sa.Column("model", sa.String(length=32), nullable=False),
        sa.Column("dataset", sa.String(length=32), nullable=False),
        sa.Column("training_config", JSON_TYPE, nullable=False),
        sa.Column("accelerator_name", sa.String(length=64), nullable=False),
        sa.Column("accelerator_config", JSON_TYPE, nullable=False),
        sa.Column("params", JSON_TYPE, nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("task_id", sa.String(length=64), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("accuracy", sa.Float(), nullable=True),
        sa.Column("loss", sa.Float(), nullable=True),
        sa.Column("total_cycles", sa.BigInteger(), nullable=True),
        sa.Column("compute_cycles", sa.BigInteger(), nullable=True),
        sa.Column("stall_cycles", sa.BigInteger(), nullable=True),
        sa.Column("energy_pj", sa.Float(), nullable=True),
        sa.Column("macs_algorithmic", sa.BigInteger(), nullable=True),
        sa.Column("macs_actual", sa.BigInteger(), nullable=True),
        sa.Column("macs_skipped", sa.BigInteger(), nullable=True),
        sa.Column("macs_overhead", sa.BigInteger(), nullable=True),
        sa.Column("dram_bytes", sa.BigInteger(), nullable=True),
        sa.Column("speedup", sa.Float(), nullable=True),
        sa.Column("energy_ratio", sa.Float(), nullable=True),
        sa.Column("summary", JSON_TYPE, nullable=True),
        sa.ForeignKeyConstraint(
            ["baseline_run_id"],
            ["runs.id"],
            name=op.f("fk_runs_baseline_run_id_runs"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_runs_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["training_id"],
            ["trainings.id"],
            name=op.f("fk_runs_training_id_trainings"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index("ix_runs_accuracy", ["accuracy"], unique=False)
        batch_op.create_index(
            "ix_runs_experiment_status", ["experiment_id", "status"], unique=False
        )
        batch_op.create_index("ix_runs_model_dataset", ["model", "dataset"], unique=False)
        batch_op.create_index("ix_runs_speedup", ["speedup"], unique=False)
        batch_op.create_index("ix_runs_status_created", ["status", "created_at"], unique=False)
        batch_op.create_index("ix_runs_technique", ["technique"], unique=False)
        batch_op.create_index("ix_runs_training", ["training_id"], unique=False)

    op.create_table(
        "layer_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("layer", sa.String(length=120), nullable=False),
        sa.Column("training_pass", sa.String(length=16), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("macs_algorithmic", sa.BigInteger(), nullable=False),
        sa.Column("macs_actual", sa.BigInteger(), nullable=False),
        sa.Column("macs_skipped", sa.BigInteger(), nullable=False),
        sa.Column("macs_overhead", sa.BigInteger(), nullable=False),
        sa.Column("compute_cycles", sa.BigInteger(), nullable=False),
        sa.Column("stall_cycles", sa.BigInteger(), nullable=False),
        sa.Column("total_cycles", sa.BigInteger(), nullable=False),
        sa.Column("utilization", sa.Float(), nullable=False),
        sa.Column("mapping_efficiency", sa.Float(), nullable=False),
        sa.Column("dram_bytes", sa.BigInteger(), nullable=False),
        sa.Column("energy_pj", sa.Float(), nullable=False),
        sa.Column("details", JSON_TYPE, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_layer_results_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_layer_results")),
        sa.UniqueConstraint("run_id", "position", name=op.f("uq_layer_results_run_id")),
    )


def downgrade() -> None:
    op.drop_table("layer_results")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_training")
        batch_op.drop_index("ix_runs_technique")
        batch_op.drop_index("ix_runs_status_created")
        batch_op.drop_index("ix_runs_speedup")
        batch_op.drop_index("ix_runs_model_dataset")
        batch_op.drop_index("ix_runs_experiment_status")
        batch_op.drop_index("ix_runs_accuracy")

    op.drop_table("runs")
    op.drop_table("epoch_metrics")
    with op.batch_alter_table("trainings", schema=None) as batch_op:
        batch_op.drop_index("ix_trainings_status")

    op.drop_table("trainings")
    with op.batch_alter_table("share_links", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_share_links_dashboard_id"))

    op.drop_table("share_links")
    with op.batch_alter_table("team_memberships", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_team_memberships_user_id"))

    op.drop_table("team_memberships")
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.drop_index("ix_experiments_team_created")
        batch_op.drop_index("ix_experiments_owner_created")

    op.drop_table("experiments")
    with op.batch_alter_table("dashboards", schema=None) as batch_op:
        batch_op.drop_index("ix_dashboards_team")
        batch_op.drop_index("ix_dashboards_owner")

    op.drop_table("dashboards")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_tokens_user_id"))

    op.drop_table("api_tokens")
    op.drop_table("users")
    op.drop_table("teams")
