from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.db import migrate
from backend.settings import Settings
from tests.conftest import orrery_env, service_settings

TINY_TRAINING = {
    "model": "mlp",
    "dataset": "digits",
    "epochs": 1,
    "batch_size": 32,
    "train_samples": 256,
    "test_samples": 128,
}


@pytest.fixture
def pg_settings(postgres_url: str, redis_db_url: str, tmp_path: Path) -> Settings:
    # No background reconciler: these tests send and redeliver tasks themselves.
    return service_settings(
        postgres_url, redis_db_url, tmp_path, single_user=True, reconcile_interval=0
    )


@pytest.fixture
def api(pg_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(pg_settings)) as client:
        yield client


def worker_env(settings: Settings, redis_db_url: str, data_dir: Path) -> dict[str, str]:
    """The environment of a worker process on these settings' PostgreSQL and Redis."""
    return orrery_env(
        ORRERY_DATA_DIR=str(data_dir),
        ORRERY_DATABASE_URL=settings.effective_database_url,
        ORRERY_BROKER_URL=redis_db_url,
        ORRERY_RESULT_BACKEND=redis_db_url,
    )


@pytest.fixture(params=[pytest.param("postgresql", marks=pytest.mark.slow), "sqlite"])
def any_database(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[TestClient, str]]:
    """The API on PostgreSQL (one GROUP BY with stddev_samp) or on embedded SQLite (two passes)."""
    if request.param == "postgresql":
        settings = request.getfixturevalue("pg_settings")
    else:
        settings = Settings(data_dir=tmp_path / "data", reconcile_interval=0)
        settings.ensure_data_dir()
        migrate.upgrade(settings.effective_database_url)
    with TestClient(create_app(settings)) as client:
        yield client, settings.effective_database_url
