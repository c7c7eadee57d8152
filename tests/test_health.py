"""`/api/v1/health` reports the database and the broker, for real."""

from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.settings import Settings
from tests.conftest import embedded_server


def test_health_on_embedded_defaults(embedded_settings: Settings) -> None:
    with TestClient(create_app(embedded_settings)) as client:
        response = client.get("/api/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"] == {"ok": True, "detail": "sqlite"}
    assert body["broker"]["ok"] is True


def test_health_on_postgresql_and_redis(
    postgres_url: str, redis_db_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        database_url=postgres_url,
        broker_url=redis_db_url,
        result_backend=redis_db_url,
        single_user=True,  # the local user is an administrator, who sees what answered
    )
    with TestClient(create_app(settings)) as client:
        body = client.get("/api/v1/health").json()
    assert body["status"] == "ok"
    assert body["database"]["detail"] == "postgresql"
    assert body["broker"]["ok"] is True


def test_health_reports_an_unreachable_broker(embedded_settings: Settings) -> None:
    settings = embedded_settings.model_copy(update={"broker_url": "redis://127.0.0.1:1/0"})
    with TestClient(create_app(settings)) as client:
        response = client.get("/api/v1/health")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "degraded"
    assert body["database"]["ok"] is True
    assert body["broker"]["ok"] is False
    assert body["broker"]["detail"]


def test_openapi_docs_are_served(embedded_settings: Settings) -> None:
    with TestClient(create_app(embedded_settings)) as client:
        schema = client.get("/api/openapi.json").json()
        docs = client.get("/api/docs")
    assert "/api/v1/health" in schema["paths"]
    assert docs.status_code == 200


@pytest.mark.slow  # starts `orrery serve`
def test_orrery_serve_answers_health_with_no_external_server(tmp_path: Path) -> None:
    with embedded_server(tmp_path / "data") as server:
        response = httpx.get(f"{server.url}/api/v1/health")
        assert response.json()["database"]["detail"] == "sqlite"
        assert (tmp_path / "data" / "orrery.db").exists()
    assert f"{server.url}/" in server.output
