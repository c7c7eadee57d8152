"""Read-only share links on PostgreSQL: unguessable, stored hashed, revocable; a link shows one
dashboard without login and opens nothing else."""

from __future__ import annotations

import hashlib

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.db.models import ShareLink
from backend.db.session import session_scope
from backend.settings import Settings
from tests.dashboard.conftest import World


def make_dashboard(client: TestClient, world: World) -> str:
    response = client.post(
        "/api/v1/dashboards",
        json={"name": "shared view", "config": {"run_ids": world.run_ids, "charts": ["pareto"]}},
        headers=world.owner.auth,
    )
    return response.json()["id"]


def test_link_shows_the_dashboard_without_login(client: TestClient, world: World) -> None:
    dashboard_id = make_dashboard(client, world)
    link = client.post(
        f"/api/v1/dashboards/{dashboard_id}/share-links", headers=world.owner.auth
    ).json()
    assert len(link["token"]) >= 43 and link["path"] == f"/shared/{link['token']}"
    shared = client.get(f"/api/v1/shared/{link['token']}")
    assert shared.status_code == 200
    body = shared.json()
    assert body["name"] == "shared view" and body["charts"] == ["pareto"]
    assert sorted(r["id"] for r in body["data"]["runs"]) == sorted(world.run_ids)
    assert "owner_id" not in body and "team_id" not in body
    # The page itself is served to anyone with the link.
    page = client.get(link["path"])
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]


def test_link_shows_the_summary_of_the_dashboards_runs_only(
    client: TestClient, world: World
) -> None:
    """The summary table's design points cover the dashboard's runs and no other run of their
    experiment; each mean is its runs' (here one seed each)."""
    chosen = [world.baseline_id, next(i for i in world.run_ids if i != world.baseline_id)]
    dashboard_id = client.post(
        "/api/v1/dashboards",
        json={"name": "two runs", "config": {"run_ids": chosen}},
        headers=world.owner.auth,
    ).json()["id"]
    token = client.post(
        f"/api/v1/dashboards/{dashboard_id}/share-links", headers=world.owner.auth
    ).json()["token"]
    groups = client.get(f"/api/v1/shared/{token}").json()["groups"]
    assert sorted(i for g in groups for i in g["run_ids"]) == sorted(chosen)
    runs = {r["id"]: r for r in client.get(f"/api/v1/shared/{token}").json()["data"]["runs"]}
    for group in groups:
        (run_id,) = group["run_ids"]
        assert group["technique"] == runs[run_id]["technique"]
        assert group["speedup"]["mean"] == pytest.approx(runs[run_id]["speedup"])
        assert group["speedup"]["n"] == 1 and group["done"] == 1


def test_token_is_stored_only_as_its_sha256(
    client: TestClient, world: World, settings: Settings
) -> None:
    dashboard_id = make_dashboard(client, world)
    tokens = [
        client.post(
            f"/api/v1/dashboards/{dashboard_id}/share-links", headers=world.owner.auth
        ).json()["token"]
        for _ in range(2)
    ]
    assert tokens[0] != tokens[1]
    with session_scope(settings.effective_database_url) as db:
        hashes = list(db.scalars(select(ShareLink.token_hash).order_by(ShareLink.id)))
    assert hashes == [hashlib.sha256(t.encode()).hexdigest() for t in tokens]
    listed = client.get(
        f"/api/v1/dashboards/{dashboard_id}/share-links", headers=world.owner.auth
    ).text
    assert all(token not in listed for token in tokens)


def test_link_opens_nothing_else(client: TestClient, world: World) -> None:
    dashboard_id = make_dashboard(client, world)
    token = client.post(
        f"/api/v1/dashboards/{dashboard_id}/share-links", headers=world.owner.auth
    ).json()["token"]
    as_bearer = {"Authorization": f"Bearer {token}"}
    for path in (
        "/api/v1/runs",
        f"/api/v1/runs/{world.run_ids[0]}",
        "/api/v1/experiments",
        "/api/v1/dashboards",
        f"/api/v1/dashboards/{dashboard_id}",
        f"/api/v1/dashboards/{dashboard_id}/data",
    ):
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers=as_bearer).status_code == 401, path
    assert client.patch(f"/api/v1/dashboards/{dashboard_id}", json={"name": "x"}).status_code in (
        401,
        403,
    )


def test_revoked_and_unknown_links_are_404(client: TestClient, world: World) -> None:
    dashboard_id = make_dashboard(client, world)
    base = f"/api/v1/dashboards/{dashboard_id}/share-links"
    kept = client.post(base, headers=world.owner.auth).json()
    revoked = client.post(base, headers=world.owner.auth).json()
    response = client.delete(f"{base}/{revoked['id']}", headers=world.owner.auth)
    assert response.status_code == 204
    assert client.delete(f"{base}/{revoked['id']}", headers=world.owner.auth).status_code == 204
    assert client.get(f"/api/v1/shared/{revoked['token']}").status_code == 404
    assert client.get(f"/api/v1/shared/{kept['token']}").status_code == 200
    assert client.get(f"/api/v1/shared/{kept['token'][:-1]}x").status_code in (404,)
    assert client.get("/api/v1/shared/" + "a" * 200).status_code == 422
    links = client.get(base, headers=world.owner.auth).json()
    assert [link["revoked_at"] is not None for link in links] == [False, True]
    # Another dashboard's link id cannot be revoked through this one.
    other = make_dashboard(client, world)
    assert (
        client.delete(
            f"/api/v1/dashboards/{other}/share-links/{kept['id']}", headers=world.owner.auth
        ).status_code
        == 404
    )


def test_deleting_the_dashboard_ends_its_links(client: TestClient, world: World) -> None:
    dashboard_id = make_dashboard(client, world)
    token = client.post(
        f"/api/v1/dashboards/{dashboard_id}/share-links", headers=world.owner.auth
    ).json()["token"]
    client.delete(f"/api/v1/dashboards/{dashboard_id}", headers=world.owner.auth)
    assert client.get(f"/api/v1/shared/{token}").status_code == 404
