"""The anonymous health check says ok or degraded per component, nothing about where the
components live: the broker's host and port, and exception texts, are for administrators."""

from __future__ import annotations

from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.settings import Settings
from tests.security.conftest import BASE_URL, make_person

UNREACHABLE_BROKER = "redis://127.0.0.1:1/0"


def test_health_names_the_broker_only_to_administrators(accounts_settings: Settings) -> None:
    settings = accounts_settings.model_copy(update={"broker_url": UNREACHABLE_BROKER})
    admin = make_person(settings, "ada", admin=True)
    user = make_person(settings, "uma")
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        for headers in ({}, user.auth, {"Authorization": "Bearer not-a-token"}):
            answer = client.get("/api/v1/health", headers=headers)
            assert answer.status_code == 503
            body = answer.json()
            assert body["status"] == "degraded"
            assert body["database"] == {"ok": True, "detail": None}
            assert body["broker"] == {"ok": False, "detail": None}
            assert "127.0.0.1" not in answer.text and "Error" not in answer.text
            assert "postgresql" not in answer.text
        as_admin = client.get("/api/v1/health", headers=admin.auth)
    assert as_admin.status_code == 503
    assert as_admin.json()["database"] == {"ok": True, "detail": "postgresql"}
    assert as_admin.json()["broker"]["ok"] is False and as_admin.json()["broker"]["detail"]
