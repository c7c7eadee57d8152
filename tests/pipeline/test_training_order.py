"""Trainings are trained in the order the expansion records them, each seed's baseline first, end
to end through a real worker of concurrency 1: on the embedded broker (`orrery serve`: SQLite and
kombu's SQLAlchemy transport) and on Redis with PostgreSQL. A technique training that finished
before its baseline would leave its runs without a speedup until the baseline is done."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.db.models import Training
from backend.db.session import session_scope
from backend.settings import Settings
from tests.conftest import embedded_server, start_worker, stop_process
from tests.pipeline.conftest import TINY_TRAINING, worker_env
from tests.reliability.chaos import poll

pytestmark = pytest.mark.slow  # starts `orrery serve` and a worker

SEEDS = [0, 1, 2]
SPEC = {
    "name": "order",
    "training": TINY_TRAINING,
    "techniques": [{"name": "sparsetrain"}, {"name": "mercury"}],
    "accelerators": ["edge"],
    "seeds": SEEDS,
}


def claim_order(database_url: str) -> list[tuple[int, str, int]]:
    """(id, technique, seed) of every training, in the order workers claimed them."""
    with session_scope(database_url) as db:
        trainings = list(db.scalars(select(Training).order_by(Training.id)))
        assert {t.status for t in trainings} == {"done"}
        claimed = sorted(trainings, key=lambda t: (t.started_at, t.id))
        return [(t.id, t.technique, t.training_config["seed"]) for t in claimed]


def assert_recorded_order(order: list[tuple[int, str, int]]) -> None:
    """Claimed in id order, which is the expansion's: per seed the baseline, then each
    technique as the spec lists them."""
    assert [training_id for training_id, _, _ in order] == sorted(t for t, _, _ in order)
    techniques = ["baseline", *(t["name"] for t in SPEC["techniques"])]  # type: ignore[union-attr]
    expected = [(technique, seed) for seed in SEEDS for technique in techniques]
    assert [(technique, seed) for _, technique, seed in order] == expected


def test_embedded_broker_trains_in_recorded_order_baselines_first(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    with embedded_server(data_dir, ORRERY_WORKER_CONCURRENCY="1") as server:
        experiment = httpx.post(f"{server.url}/api/v1/experiments", json=SPEC, timeout=30).json()
        poll(
            lambda: (
                httpx.get(f"{server.url}/api/v1/experiments/{experiment['id']}").json()["status"]
                == "done"
            ),
            240,
            "the experiment",
        )
    assert_recorded_order(claim_order(f"sqlite:///{data_dir / 'orrery.db'}"))


def test_redis_broker_trains_in_recorded_order_baselines_first(
    api: TestClient, pg_settings: Settings, redis_db_url: str, tmp_path: Path
) -> None:
    response = api.post("/api/v1/experiments", json=SPEC)
    assert response.status_code == 201, response.text
    worker = start_worker(worker_env(pg_settings, redis_db_url, tmp_path), tmp_path)
    url = pg_settings.effective_database_url
    try:
        poll(
            lambda: (
                api.get(f"/api/v1/experiments/{response.json()['id']}").json()["status"] == "done"
            ),
            240,
            "the experiment",
        )
    finally:
        output = stop_process(worker)
    assert output is not None
    assert_recorded_order(claim_order(url))
