"""PostgreSQL restarted (and stopped) under a running API, on a cluster of the test's own:
while it is down requests get a clear 503, and once it is back the same API process serves
again (pool pre-ping replaces the dead connections) with everything stored still there."""

from __future__ import annotations

import time
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from backend.api.app import create_app
from backend.db import migrate
from backend.settings import Settings
from tests.pipeline.conftest import TINY_TRAINING
from tests.reliability.services import OwnPostgres

SPEC = {
    "name": "through a restart",
    "training": TINY_TRAINING,
    "techniques": [{"name": "mercury"}],
    "accelerators": ["edge"],
}


def create_database(server: OwnPostgres, name: str) -> str:
    admin = create_engine(server.url(), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return server.url(name)


def test_api_recovers_from_a_postgres_restart_without_restarting(
    own_postgres: OwnPostgres, redis_db_url: str, tmp_path: Path
) -> None:
    database_url = create_database(own_postgres, "orrery")
    migrate.upgrade(database_url)
    settings = Settings(
        data_dir=tmp_path,
        database_url=database_url,
        broker_url=redis_db_url,
        result_backend=redis_db_url,
        single_user=True,
        reconcile_interval=0,
    )
    with TestClient(create_app(settings)) as api:
        first = api.post("/api/v1/experiments", json=SPEC)
        assert first.status_code == 201
        # Several pooled connections, all of which the restart will kill.
        for _ in range(5):
            assert api.get("/api/v1/experiments").status_code == 200

        own_postgres.restart()
        listed = api.get("/api/v1/experiments")
        assert listed.status_code == 200
        assert [e["id"] for e in listed.json()["items"]] == [first.json()["id"]]
        assert api.get("/api/v1/health").json()["database"]["ok"]
        second = api.post("/api/v1/experiments", json={**SPEC, "name": "after the restart"})
        assert second.status_code == 201

        own_postgres.stop()
        down = api.get("/api/v1/experiments")
        assert down.status_code == 503
        assert "database is unreachable" in down.json()["detail"]
        refused = api.post("/api/v1/experiments", json={**SPEC, "name": "while it is down"})
        assert refused.status_code == 503

        own_postgres.start()
        deadline = time.monotonic() + 30
        while (back := api.get("/api/v1/experiments")).status_code != 200:
            assert time.monotonic() < deadline, back.text
            time.sleep(0.2)
        names = sorted(e["name"] for e in back.json()["items"])
        assert names == ["after the restart", "through a restart"]
        runs = api.get("/api/v1/runs").json()
        assert runs["total"] == 4  # (baseline, mercury) for each stored experiment
