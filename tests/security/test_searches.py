"""Who may see and change a design search: as its experiment. Another user gets 404 on every
one of its routes and changes nothing; a team viewer reads it but may not cancel it or turn
its designs into runs (403), though they may save a design as their own accelerator, and the
search says so (`can_edit`); saved accelerators are their owner's alone."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import update

from backend.db.models import DesignSearchRow
from backend.db.session import session_scope
from backend.settings import Settings
from tests.security.conftest import World


def _running(settings: Settings, search_id: int) -> None:
    with session_scope(settings.effective_database_url) as db:
        db.execute(
            update(DesignSearchRow).where(DesignSearchRow.id == search_id).values(status="running")
        )


def test_another_user_can_neither_see_nor_cancel_a_search(
    client: TestClient, world: World, accounts_settings: Settings
) -> None:
    search_id = world.ids["search_id"]
    _running(accounts_settings, search_id)
    bob = world.bob.auth
    for path in ("", "/fronts", "/sample"):
        seen = client.get(f"/api/v1/searches/{search_id}{path}", headers=bob)
        assert seen.status_code == 404 and world.marker not in seen.text
    assert (
        client.get(f"/api/v1/experiments/{world.experiment_id}/searches", headers=bob).status_code
        == 404
    )
    assert client.post(f"/api/v1/searches/{search_id}/cancel", headers=bob).status_code == 404
    assert (
        client.post(f"/api/v1/searches/{search_id}/designs/0/runs", headers=bob).status_code == 404
    )
    saved = client.post(
        f"/api/v1/searches/{search_id}/designs/0/accelerator", json={"name": "x"}, headers=bob
    )
    assert saved.status_code == 404
    assert client.get("/api/v1/accelerators", headers=bob).json() == []
    gone = client.delete(f"/api/v1/accelerators/{world.ids['accelerator_id']}", headers=bob)
    assert gone.status_code == 404

    alice = world.alice.auth
    still = client.get(f"/api/v1/searches/{search_id}", headers=alice).json()
    assert still["status"] == "running"
    assert [a["id"] for a in client.get("/api/v1/accelerators", headers=alice).json()] == [
        world.ids["accelerator_id"]
    ]


def test_team_viewers_read_members_cancel(
    client: TestClient, world: World, accounts_settings: Settings
) -> None:
    search_id = world.ids["search_id"]
    _running(accounts_settings, search_id)
    victor, carol = world.victor.auth, world.carol.auth
    assert client.get(f"/api/v1/searches/{search_id}/fronts", headers=victor).status_code == 200
    refused = client.post(f"/api/v1/searches/{search_id}/cancel", headers=victor)
    assert refused.status_code == 403
    assert (
        client.post(f"/api/v1/searches/{search_id}/designs/0/runs", headers=victor).status_code
        == 403
    )
    started = client.post(
        f"/api/v1/experiments/{world.experiment_id}/searches",
        json={"base": "edge", "parameters": {"rows": {"values": [8]}}, "mode": "grid"},
        headers=victor,
    )
    assert started.status_code == 403
    mine = client.post(
        f"/api/v1/searches/{search_id}/designs/0/accelerator", json={"name": "v"}, headers=victor
    )
    assert mine.status_code == 201, mine.text
    assert [a["name"] for a in client.get("/api/v1/accelerators", headers=victor).json()] == ["v"]
    seen = client.get(f"/api/v1/searches/{search_id}", headers=victor).json()
    assert seen["status"] == "running"
    # What the search's page offers each of them (a cancel button, runs from a design).
    listed = f"/api/v1/experiments/{world.experiment_id}/searches"
    for auth, editor in ((victor, False), (carol, True), (world.alice.auth, True)):
        assert (
            client.get(f"/api/v1/searches/{search_id}", headers=auth).json()["can_edit"] is editor
        )
        assert [s["can_edit"] for s in client.get(listed, headers=auth).json()] == [editor]

    cancelled = client.post(f"/api/v1/searches/{search_id}/cancel", headers=carol)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["can_edit"] is True
