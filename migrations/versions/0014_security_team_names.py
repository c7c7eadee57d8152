"""teams.created_by, and team names unique per creator instead of globally: a name taken by
someone else no longer refuses a new team, so creating one tells nothing about others' teams.
Existing teams count as made by their first owner.

Downgrading restores the global unique name, which fails if two teams now share a name.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.add_column(sa.Column("created_by", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_teams_created_by_users"),
            "users",
            ["created_by"],
            ["id"],
            ondelete="SET NULL",
        )
        batch_op.drop_constraint(batch_op.f("uq_teams_name"), type_="unique")
        batch_op.create_unique_constraint(batch_op.f("uq_teams_created_by"), ["created_by", "name"])
    teams = sa.table("teams", sa.column("id", sa.Integer), sa.column("created_by", sa.Integer))
    memberships = sa.table(
        "team_memberships",
        sa.column("id", sa.Integer),
        sa.column("team_id", sa.Integer),
        sa.column("user_id", sa.Integer),
        sa.column("role", sa.String),
    )
    first_owner = (
        sa.select(memberships.c.user_id)
        .where(memberships.c.team_id == teams.c.id, memberships.c.role == "owner")
        .order_by(memberships.c.id)
        .limit(1)
        .scalar_subquery()
    )
    op.execute(teams.update().values(created_by=first_owner))


def downgrade() -> None:
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_teams_created_by"), type_="unique")
        batch_op.create_unique_constraint(batch_op.f("uq_teams_name"), ["name"])
        batch_op.drop_constraint(batch_op.f("fk_teams_created_by_users"), type_="foreignkey")
        batch_op.drop_column("created_by")
