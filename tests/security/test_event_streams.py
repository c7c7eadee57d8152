"""An experiment's event stream checks access at every poll, not only when it opens: it ends
with a `denied` event once its caller is removed from the team or its token is revoked.

A real API process serves the stream (the test client would hand it over only whole)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from backend.settings import Settings
from tests.security.conftest import Person, World, uvicorn_server


@pytest.fixture
def api_url(accounts_settings: Settings, world: World) -> Iterator[str]:
    with uvicorn_server(accounts_settings, ORRERY_SINGLE_USER="false") as base:
        yield base


def events_until_opened_then_rest(url: str, person: Person, lose_access: object) -> list[str]:
    """The stream's event names: read until it has spoken, take access away, read the rest."""
    names: list[str] = []
    with httpx.stream(
        "GET", url, params={"interval": 0.2}, headers=person.auth, timeout=60
    ) as stream:
        assert stream.status_code == 200, stream.read()
        for line in stream.iter_lines():
            if line.startswith("event: "):
                names.append(line.removeprefix("event: "))
                if names[-1] == "experiment":
                    lose_access()  # type: ignore[operator]
    return names


def test_removal_from_the_team_ends_the_stream(
    client: TestClient, world: World, api_url: str
) -> None:
    url = f"{api_url}/api/v1/experiments/{world.experiment_id}/events"
    removal = f"/api/v1/teams/{world.team_id}/members/{world.carol.id}"

    def remove_carol() -> None:
        assert client.delete(removal, headers=world.alice.auth).status_code == 204

    names = events_until_opened_then_rest(url, world.carol, remove_carol)
    assert names[-1] == "denied" and "end" not in names
    assert httpx.get(url, headers=world.carol.auth).status_code == 404


def test_a_revoked_token_ends_the_stream(client: TestClient, world: World, api_url: str) -> None:
    url = f"{api_url}/api/v1/experiments/{world.experiment_id}/events"

    def revoke_alices_token() -> None:
        revoked = client.delete(f"/api/v1/tokens/{world.alice_token_id}", headers=world.alice.auth)
        assert revoked.status_code == 204

    names = events_until_opened_then_rest(url, world.alice, revoke_alices_token)
    assert names[-1] == "denied"
    assert httpx.get(url, headers=world.alice.auth).status_code == 401
