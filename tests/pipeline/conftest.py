from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.db import migrate
from backend.settings import Settings

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
    settings = Settings(
        data_dir=tmp_path,
        database_url=postgres_url,
        broker_url=redis_db_url,
        result_backend=redis_db_url,
        single_user=True,
    )
    migrate.upgrade(postgres_url)
    return settings


@pytest.fixture
def api(pg_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(pg_settings)) as client:
        yield client
