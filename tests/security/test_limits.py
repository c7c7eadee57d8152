"""Limits answer with clear errors: body size (413), sweep size (422), active runs (429); and a
burst of requests waits its turn instead of locking the server up."""

from __future__ import annotations

import asyncio

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from backend.api.app import create_app
from backend.db.models import Experiment
from backend.db.session import session_scope
from backend.settings import Settings
from tests.security.conftest import BASE_URL, make_person, spec


def experiments(settings: Settings) -> int:
    with session_scope(settings.effective_database_url) as db:
        return db.scalar(select(func.count()).select_from(Experiment)) or 0


def test_a_burst_far_beyond_the_connection_pool_is_answered_in_full(
    accounts_settings: Settings,
) -> None:
    """150 requests at once against 40 pooled connections and 40 worker threads: without the
    concurrency limit, connections end up held by requests waiting for a thread and threads by
    requests waiting for a connection, until the pool times out."""
    person = make_person(accounts_settings, "alice")
    app = create_app(accounts_settings)

    async def burst() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url=BASE_URL, timeout=60) as client,
        ):
            answers = await asyncio.gather(
                *(client.get("/api/v1/auth/me", headers=person.auth) for _ in range(150))
            )
        return [answer.status_code for answer in answers]

    assert asyncio.run(asyncio.wait_for(burst(), timeout=25)) == [200] * 150


def test_oversized_bodies_are_refused_declared_or_streamed(
    client: TestClient, accounts_settings: Settings
) -> None:
    person = make_person(accounts_settings, "alice")
    limit = accounts_settings.max_body_bytes
    padded = {**spec("big"), "name": "x" * (limit + 10)}
    declared = client.post("/api/v1/experiments", json=padded, headers=person.auth)
    assert declared.status_code == 413
    assert f"limit is {limit} bytes" in declared.json()["detail"]

    def chunks():  # no Content-Length: the server counts what arrives
        for _ in range(limit // 65536 + 2):
            yield b" " * 65536

    streamed = client.post(
        "/api/v1/experiments",
        content=chunks(),
        headers={**person.auth, "Content-Type": "application/json"},
    )
    assert streamed.status_code == 413
    assert experiments(accounts_settings) == 0


def test_sweep_expansion_over_the_limit_names_the_field(accounts_settings: Settings) -> None:
    settings = accounts_settings.model_copy(update={"max_runs_per_experiment": 4})
    person = make_person(settings, "alice")
    big = {**spec("sweep"), "sweep": {"parameters": {"accelerator.rows": {"values": [4, 8, 16]}}}}
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        response = client.post("/api/v1/experiments", json=big, headers=person.auth)
    assert response.status_code == 422
    assert "over the limit of 4" in response.json()["detail"][0]["msg"]
    assert experiments(settings) == 0


def test_active_runs_per_user_are_capped(accounts_settings: Settings) -> None:
    settings = accounts_settings.model_copy(update={"max_active_runs_per_user": 3})
    alice = make_person(settings, "alice")
    bob = make_person(settings, "bob")
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        first = client.post("/api/v1/experiments", json=spec("one"), headers=alice.auth)
        assert first.status_code == 201 and first.json()["total_runs"] == 2
        second = client.post("/api/v1/experiments", json=spec("two"), headers=alice.auth)
        assert second.status_code == 429
        detail = second.json()["detail"]
        assert "adds 2 runs to your 2 queued or running" in detail and "limit of 3" in detail
        assert (
            client.post("/api/v1/experiments", json=spec("b"), headers=bob.auth).status_code == 201
        )
        # Cancelling frees the slots.
        client.post(f"/api/v1/experiments/{first.json()['id']}/cancel", headers=alice.auth)
        third = client.post("/api/v1/experiments", json=spec("three"), headers=alice.auth)
        assert third.status_code == 201
    assert experiments(settings) == 3


def test_queued_trainings_per_user_are_capped_with_the_queue_ahead(
    accounts_settings: Settings,
) -> None:
    settings = accounts_settings.model_copy(update={"max_queued_trainings_per_user": 3})
    alice = make_person(settings, "alice")
    bob = make_person(settings, "bob")
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        first = client.post("/api/v1/experiments", json=spec("one"), headers=alice.auth)
        assert first.status_code == 201 and first.json()["trainings"] == 2
        assert (
            client.post("/api/v1/experiments", json=spec("b"), headers=bob.auth).status_code == 201
        )
        second = client.post("/api/v1/experiments", json=spec("two"), headers=alice.auth)
        assert second.status_code == 429
        detail = second.json()["detail"]
        assert "adds 2 trainings to your 2 queued ones" in detail, detail
        assert "limit of 3 queued trainings per user" in detail, detail
        assert "4 trainings (all users') are queued ahead" in detail, detail
        # Cancelling frees the places.
        client.post(f"/api/v1/experiments/{first.json()['id']}/cancel", headers=alice.auth)
        third = client.post("/api/v1/experiments", json=spec("three"), headers=alice.auth)
        assert third.status_code == 201
    assert experiments(settings) == 3
