"""GET /runs answers cached per database snapshot: reused while nothing is written, never stale,
never shown to another user; and API tokens that do not write on every request."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select, update

from backend.api.app import create_app
from backend.db import migrate
from backend.db.models import ApiToken, Run
from backend.db.session import session_scope
from backend.settings import Settings
from tests.security.conftest import World

QUERY = {"sort": "-accuracy", "limit": 5}


def runs_page(client: TestClient, headers: dict[str, str]) -> dict:
    response = client.get("/api/v1/runs", params=QUERY, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def test_repeated_query_is_served_from_the_cache_until_a_write(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    cache = client.app.state.read_cache
    first = runs_page(client, world.alice.auth)
    hits = cache.hits
    assert runs_page(client, world.alice.auth) == first
    assert cache.hits == hits + 1

    with session_scope(accounts_settings.effective_database_url) as db:
        db.execute(update(Run).where(Run.id == world.run_ids[0]).values(accuracy=0.99))
    after = runs_page(client, world.alice.auth)
    assert after["items"][0]["id"] == world.run_ids[0]
    assert after["items"][0]["accuracy"] == 0.99


def test_a_cached_answer_is_never_served_to_another_user(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    assert runs_page(client, world.alice.auth)["total"] == len(world.run_ids)
    assert runs_page(client, world.carol.auth)["total"] == len(world.run_ids)
    assert runs_page(client, world.bob.auth) == {
        "total": 0,
        "limit": 5,
        "offset": 0,
        "items": [],
    }

    removed = client.delete(
        f"/api/v1/teams/{world.team_id}/members/{world.carol.id}", headers=world.alice.auth
    )
    assert removed.status_code == 204, removed.text
    assert runs_page(client, world.carol.auth)["total"] == 0


def test_sqlite_answers_are_always_computed(embedded_settings: Settings) -> None:
    migrate.upgrade(embedded_settings.effective_database_url)
    with TestClient(create_app(embedded_settings)) as client:
        for _ in range(3):
            assert client.get("/api/v1/runs", params=QUERY).status_code == 200
        assert client.app.state.read_cache.hits == 0


def test_token_use_is_recorded_to_the_minute_not_on_every_request(
    client: TestClient, accounts_settings: Settings, world: World
) -> None:
    def last_used() -> datetime | None:
        with session_scope(accounts_settings.effective_database_url) as db:
            return db.scalar(
                select(ApiToken.last_used_at).where(ApiToken.id == world.alice_token_id)
            )

    runs_page(client, world.alice.auth)
    recorded = last_used()
    assert recorded is not None
    runs_page(client, world.alice.auth)
    assert last_used() == recorded

    earlier = datetime.now(UTC) - timedelta(minutes=2)
    with session_scope(accounts_settings.effective_database_url) as db:
        db.execute(
            update(ApiToken).where(ApiToken.id == world.alice_token_id).values(last_used_at=earlier)
        )
    runs_page(client, world.alice.auth)
    now = last_used()
    assert now is not None and now > earlier + timedelta(minutes=1)
