"""Redis stopped while the API runs, then back empty (no persistence): submissions fail fast
with 503 and say why, nothing stored is lost, and the reconciler sends the stranded trainings
again once their last send is older than its interval, so a worker completes them."""

from __future__ import annotations

import time
from pathlib import Path

import redis
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.api.app import create_app
from backend.db import migrate
from backend.db.models import Training
from backend.db.session import session_scope
from backend.delivery.queue import QUEUE
from backend.settings import Settings
from tests.conftest import orrery_env, start_worker, stop_process
from tests.pipeline.conftest import TINY_TRAINING
from tests.reliability.services import OwnRedis

SPEC = {
    "name": "through an outage",
    "training": TINY_TRAINING,
    "techniques": [{"name": "sparsetrain", "prune_rate": 0.8}],
    "accelerators": ["edge"],
}
GRACE = 5.0  # seconds after its last send before a queued training is sent again


def queued_sends(settings: Settings) -> dict[int, int]:
    with session_scope(settings.effective_database_url) as db:
        rows = db.execute(select(Training.id, Training.sends).where(Training.status == "queued"))
        return {row.id: row.sends for row in rows}


def test_redis_outage_fails_fast_loses_nothing_and_recovers(
    postgres_url: str, own_redis: OwnRedis, tmp_path: Path
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        database_url=postgres_url,
        broker_url=own_redis.url,
        result_backend=own_redis.url,
        single_user=True,
        reconcile_interval=0.5,
        reconcile_grace_seconds=GRACE,
    )
    migrate.upgrade(postgres_url)
    with TestClient(create_app(settings)) as api:
        stored = api.post("/api/v1/experiments", json=SPEC)
        assert stored.status_code == 201
        experiment_id = stored.json()["id"]
        runs_before = api.get("/api/v1/runs", params={"sort": "id"}).json()["items"]
        assert set(queued_sends(settings).values()) == {1}
        assert redis.Redis.from_url(own_redis.url).llen(QUEUE) == len(queued_sends(settings))

        own_redis.stop()
        refused = api.post("/api/v1/experiments", json={**SPEC, "name": "during the outage"})
        assert refused.status_code == 503
        assert "task queue is unreachable, nothing was submitted" in refused.json()["detail"]
        health = api.get("/api/v1/health")
        assert health.status_code == 503 and not health.json()["broker"]["ok"]
        listed = api.get("/api/v1/experiments").json()
        assert [e["id"] for e in listed["items"]] == [experiment_id]
        assert api.get("/api/v1/runs", params={"sort": "id"}).json()["items"] == runs_before

        own_redis.start()  # empty: the queued message died with the old process
        assert redis.Redis.from_url(own_redis.url).llen(QUEUE) == 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            waiting = queued_sends(settings)
            if set(waiting.values()) == {2}:  # sends refused during the outage are not counted
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the reconciler did not send the stranded trainings again")
        # One message per training: the next re-send waits twice as long.
        assert redis.Redis.from_url(own_redis.url).llen(QUEUE) == len(waiting)

        env = orrery_env(
            ORRERY_DATA_DIR=str(tmp_path),
            ORRERY_DATABASE_URL=postgres_url,
            ORRERY_BROKER_URL=own_redis.url,
            ORRERY_RESULT_BACKEND=own_redis.url,
        )
        worker = start_worker(env, cwd=tmp_path)
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                experiment = api.get(f"/api/v1/experiments/{experiment_id}").json()
                if experiment["status"] in ("done", "failed", "cancelled"):
                    break
                time.sleep(1)
        finally:
            log = stop_process(worker)
        assert experiment["status"] == "done", log[-3000:]
        assert experiment["run_counts"]["done"] == len(runs_before)
