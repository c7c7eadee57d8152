"""The anonymous health check says ok or degraded per component, nothing about where the
components live: the broker's host and port, and exception texts, are for administrators; and
whether a worker is alive, not how many nor when one last beat: that is for signed-in users."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.db.session import session_scope
from backend.delivery.liveness import beat_worker
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


def test_worker_liveness_details_are_for_signed_in_callers(accounts_settings: Settings) -> None:
    """Anonymous callers learn whether a worker is alive, not how many nor when one last beat
    (the open choice in backend/api/routes/health.py); a signed-in user sees both."""
    url = accounts_settings.effective_database_url
    with session_scope(url) as db:
        beat_worker(db, "celery@one", "host-one", 101, datetime.now(UTC))
        beat_worker(db, "celery@two", "host-two", 102, datetime.now(UTC))
    user = make_person(accounts_settings, "uma")
    with TestClient(create_app(accounts_settings), base_url=BASE_URL) as client:
        for headers in ({}, {"Authorization": "Bearer not-a-token"}):
            workers = client.get("/api/v1/health", headers=headers).json()["workers"]
            assert workers["ok"] is True
            assert workers["live"] is None and workers["last_beat_at"] is None
            assert workers["lease_seconds"] == accounts_settings.lease_seconds
        signed_in = client.get("/api/v1/health", headers=user.auth).json()["workers"]
    assert signed_in["ok"] is True and signed_in["live"] == 2
    assert signed_in["last_beat_at"] is not None
