"""change topics by column: on the tables with volatile columns (a training's progress, lease
and worker heartbeats: backend/db/change_log.py, `VOLATILE`), updates are logged by a row-level
trigger under the topic of each such column that changed, and under the table only when another
column changed; writers no longer name a topic themselves.

Revision ID: 0022_change_topics_by_column
Revises: 0021
Create Date: 2026-12-05
"""

from collections.abc import Sequence

from alembic import op

from backend.db import change_log

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(change_log.FUNCTION_DDL)  # no longer reads a topic set by the writer
    op.execute(change_log.UPDATE_FUNCTION_DDL)
    for table in change_log.VOLATILE:
        for statement in change_log.watch_volatile(table):
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in change_log.VOLATILE:
        for statement in change_log.unwatch_volatile(table):
            op.execute(statement)
    op.execute(f"DROP FUNCTION IF EXISTS {change_log.UPDATE_TRIGGER_FUNCTION}()")
