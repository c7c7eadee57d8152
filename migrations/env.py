"""Alembic environment: the URL comes from the caller's config or from Orrery's settings."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from backend.db import sort_indexes
from backend.db.models import Base
from backend.settings import get_settings

config = context.config
target_metadata = Base.metadata


def database_url() -> str:
    return config.get_main_option("sqlalchemy.url") or get_settings().effective_database_url


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Compare every object but the PostgreSQL-only sort indexes, which no model declares."""
    return not (type_ == "index" and name in sort_indexes.DESCENDING)


def run_migrations_offline() -> None:
    url = database_url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
        compare_type=True,
        include_name=include_name,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    url = database_url()
    connectable = engine_from_config(
        {"sqlalchemy.url": url}, prefix="sqlalchemy.", poolclass=pool.NullPool
    )
    with connectable.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=url.startswith("sqlite"),  # SQLite alters tables by copying them
            compare_type=True,
            include_name=include_name,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
