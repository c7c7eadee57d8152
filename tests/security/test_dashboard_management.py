"""Managing a team dashboard: its owner and its team's owners move it, delete it and see its
share links; team members only rename and configure it; viewers only read it.

The escalation this guards against: a member moving the owner's dashboard into a team of the
member's own became an owner of its team, and so could publish it through a link or delete it
with the owner's links.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.security.conftest import Person, World, join_team, make_person


def own_team(client: TestClient, person: Person, name: str) -> int:
    made = client.post("/api/v1/teams", json={"name": name}, headers=person.auth)
    assert made.status_code == 201, made.text
    return made.json()["id"]


def dashboard_of(client: TestClient, world: World) -> dict:
    answer = client.get(f"/api/v1/dashboards/{world.dashboard_id}", headers=world.alice.auth)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_member_cannot_move_the_owners_dashboard_then_share_or_delete_it(
    client: TestClient, world: World
) -> None:
    carol = world.carol.auth
    path = f"/api/v1/dashboards/{world.dashboard_id}"
    carols_team = own_team(client, world.carol, f"carol's {world.marker}")

    for team_id in (carols_team, None):
        moved = client.patch(path, json={"team_id": team_id}, headers=carol)
        assert moved.status_code == 403, moved.text
        assert "owner" in moved.json()["detail"]
    assert dashboard_of(client, world)["team_id"] == world.team_id
    assert client.post(f"{path}/share-links", headers=carol).status_code == 403

    # Saving the dashboard with its current team (as the page does) is an edit, not a move.
    saved = client.patch(
        path, json={"name": "renamed by carol", "team_id": world.team_id}, headers=carol
    )
    assert saved.status_code == 200, saved.text
    assert saved.json()["can_edit"] is True and saved.json()["can_manage"] is False


def test_a_member_cannot_delete_the_dashboard_nor_see_or_revoke_its_links(
    client: TestClient, world: World
) -> None:
    path = f"/api/v1/dashboards/{world.dashboard_id}"
    for person in (world.carol, world.victor):
        assert client.delete(path, headers=person.auth).status_code == 403
        assert client.get(f"{path}/share-links", headers=person.auth).status_code == 403
        revoke = client.delete(f"{path}/share-links/{world.share_link_id}", headers=person.auth)
        assert revoke.status_code == 403
    assert dashboard_of(client, world)["name"] == f"dashboard {world.marker}"
    assert client.get(f"/api/v1/shared/{world.share_token}").status_code == 200
    links = client.get(f"{path}/share-links", headers=world.alice.auth).json()
    assert [(link["id"], link["revoked_at"]) for link in links] == [(world.share_link_id, None)]


@pytest.mark.parametrize("manager", ["alice", "team owner"])
def test_the_owner_and_team_owners_manage_the_dashboard(
    client: TestClient, world: World, accounts_settings, manager: str
) -> None:
    if manager == "alice":
        person = world.alice
    else:
        person = make_person(accounts_settings, "olga")
        join_team(client, world.alice, person, world.team_id, "owner")
    path = f"/api/v1/dashboards/{world.dashboard_id}"
    shown = client.get(path, headers=person.auth).json()
    assert shown["can_edit"] is True and shown["can_manage"] is True
    listed = client.get(f"{path}/share-links", headers=person.auth)
    assert listed.status_code == 200 and len(listed.json()) == 1

    # Into another team of theirs: allowed, and only into a team they may give work to.
    elsewhere = own_team(client, person, f"{manager} elsewhere {world.marker}")
    moved = client.patch(path, json={"team_id": elsewhere}, headers=person.auth)
    assert moved.status_code == 200, moved.text
    bobs_team = own_team(client, world.bob, f"bob's {world.marker}")
    foreign = client.patch(path, json={"team_id": bobs_team}, headers=person.auth)
    assert foreign.status_code == 422
    assert foreign.json()["detail"][0]["loc"] == ["body", "team_id"]

    assert client.delete(path, headers=person.auth).status_code == 204
    assert client.get(path, headers=world.alice.auth).status_code == 404
    assert client.get(f"/api/v1/shared/{world.share_token}").status_code == 404
