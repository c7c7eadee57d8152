"""The one migration chain builds the models' schema on SQLite and PostgreSQL, and round-trips."""

from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from backend.db import migrate
from backend.db.models import Base

EXPECTED_TABLES = {
    "users",
    "teams",
    "team_memberships",
    "api_tokens",
    "experiments",
    "trainings",
    "runs",
    "layer_results",
    "epoch_metrics",
    "dashboards",
    "share_links",
    "user_sessions",
    "login_throttles",
    "team_invitations",
    "worker_heartbeats",
    "run_attempts",
}


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def _round_trip(url: str) -> None:
    migrate.upgrade(url)
    assert _tables(url) == EXPECTED_TABLES == set(Base.metadata.tables)
    migrate.check(url)  # raises if models and migrations drift apart

    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO users (email, display_name, is_admin, is_active) "
                "VALUES ('a@b.c', 'A', false, true)"
            )
        )
    engine.dispose()

    migrate.downgrade(url, "base")
    assert _tables(url) == set()
    migrate.upgrade(url)
    assert _tables(url) == EXPECTED_TABLES
    migrate.check(url)


def test_round_trip_on_sqlite(tmp_path: Path) -> None:
    _round_trip(f"sqlite:///{tmp_path / 'orrery.db'}")


def test_round_trip_on_postgresql(postgres_url: str) -> None:
    _round_trip(postgres_url)


@pytest.mark.parametrize("table", ["runs", "experiments", "api_tokens", "share_links"])
def test_query_indexes_exist_on_postgresql(postgres_url: str, table: str) -> None:
    migrate.upgrade(postgres_url)
    engine = create_engine(postgres_url)
    inspector = inspect(engine)
    indexed = {tuple(ix["column_names"]) for ix in inspector.get_indexes(table)}
    unique = {tuple(uc["column_names"]) for uc in inspector.get_unique_constraints(table)}
    engine.dispose()
    expected = {
        "runs": {("experiment_id", "status"), ("technique",), ("status", "created_at")},
        "experiments": {("owner_id", "created_at"), ("team_id", "created_at")},
        "api_tokens": {("token_hash",)},
        "share_links": {("token_hash",)},
    }[table]
    assert expected <= indexed | unique


def test_the_chain_has_one_head() -> None:
    """Migrations written in parallel must be rebased into one line, not merged as branches."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(migrate.alembic_config("sqlite://"))
    assert len(scripts.get_heads()) == 1, scripts.get_heads()
    assert len(scripts.get_bases()) == 1
