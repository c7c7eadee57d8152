"""the accelerator extension `mercury` is named for its hardware: `mcache`

Stored accelerator configs carry the extension as a key: runs.accelerator_config, a run's swept
values (runs.params, paths "accelerator.mercury.<field>"), in experiments.spec the custom
accelerators (dict entries of spec["accelerators"]) and the sweep's parameter paths, and a
dashboard's run filters on swept values (dashboards.config["filters"]["param"], "path:value").
The key is renamed row by row in Python, the same on SQLite and PostgreSQL. The technique
`mercury` (its params, its sweep paths such as "mercury.signature_bits") and preset names keep
their names.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JsonType = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
BATCH = 500  # rows read per query, so a large runs table is never held in memory at once

OLD, NEW = "mercury", "mcache"

runs = sa.table(
    "runs",
    sa.column("id", sa.Integer),
    sa.column("accelerator_config", JsonType),
    sa.column("params", JsonType),
)
experiments = sa.table("experiments", sa.column("id", sa.Integer), sa.column("spec", JsonType))
dashboards = sa.table("dashboards", sa.column("id", sa.String), sa.column("config", JsonType))


def upgrade() -> None:
    _rename(OLD, NEW)


def downgrade() -> None:
    _rename(NEW, OLD)


def _rename(old: str, new: str) -> None:
    def accelerator(config: Any) -> Any:
        return _renamed_keys(config, lambda key: new if key == old else key)

    prefix = f"accelerator.{old}."

    def path(text: str) -> str:
        return f"accelerator.{new}.{text[len(prefix) :]}" if text.startswith(prefix) else text

    def paths(values: Any) -> Any:
        return _renamed_keys(values, path)

    def spec(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        renamed = dict(value)
        if isinstance(value.get("accelerators"), list):
            renamed["accelerators"] = [accelerator(choice) for choice in value["accelerators"]]
        sweep = value.get("sweep")
        if isinstance(sweep, dict) and isinstance(sweep.get("parameters"), dict):
            renamed["sweep"] = {**sweep, "parameters": paths(sweep["parameters"])}
        return renamed

    def dashboard(config: Any) -> Any:
        filters = config.get("filters") if isinstance(config, dict) else None
        if not isinstance(filters, dict) or not isinstance(filters.get("param"), list):
            return config
        param = [path(item) if isinstance(item, str) else item for item in filters["param"]]
        return {**config, "filters": {**filters, "param": param}}

    _update_rows(runs, {"accelerator_config": accelerator, "params": paths})
    _update_rows(experiments, {"spec": spec})
    _update_rows(dashboards, {"config": dashboard})


def _renamed_keys(value: Any, rename: Callable[[str], str]) -> Any:
    """A dict with its keys renamed in place of order; anything else as it is. A key is left
    alone where its new name is taken already."""
    if not isinstance(value, dict):
        return value
    return {
        (new if (new := rename(key)) == key or new not in value else key): item
        for key, item in value.items()
    }


def _update_rows(table: sa.TableClause, columns: dict[str, Callable[[Any], Any]]) -> None:
    bind = op.get_bind()
    selected = [table.c.id, *(table.c[name] for name in columns)]
    last = None
    while True:
        query = sa.select(*selected).order_by(table.c.id).limit(BATCH)
        if last is not None:
            query = query.where(table.c.id > last)
        rows = bind.execute(query).all()
        if not rows:
            return
        for row in rows:
            changed = {
                name: updated
                for name, convert in columns.items()
                if (updated := convert(getattr(row, name))) != getattr(row, name)
            }
            if changed:
                bind.execute(table.update().where(table.c.id == row.id).values(**changed))
        last = rows[-1].id
