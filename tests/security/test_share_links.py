"""Share links show only runs that the link's creator, the dashboard's owner and the author of
its config may all see, decided at every read; only the owner or a team owner makes links.

The escalation this guards against: a team member may change a team dashboard's config, so
without the rule a member could point it at the owner's private runs (or at every run the
owner sees, `{"filters": {}}`) and publish them through a link.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.security.conftest import Person, World, join_team, make_person, spec


def private_runs(client: TestClient, person: Person, name: str) -> list[int]:
    """An experiment of the person's own, in no team; its run ids."""
    made = client.post("/api/v1/experiments", json=spec(name), headers=person.auth)
    assert made.status_code == 201, made.text
    runs = client.get(
        "/api/v1/runs", params={"experiment_id": made.json()["id"]}, headers=person.auth
    )
    return sorted(run["id"] for run in runs.json()["items"])


def shared_run_ids(client: TestClient, token: str) -> set[int]:
    answer = client.get(f"/api/v1/shared/{token}")
    assert answer.status_code == 200, answer.text
    return {run["id"] for run in answer.json()["data"]["runs"]}


def patch_config(client: TestClient, world: World, person: Person, config: dict) -> None:
    changed = client.patch(
        f"/api/v1/dashboards/{world.dashboard_id}", json={"config": config}, headers=person.auth
    )
    assert changed.status_code == 200, changed.text


def test_a_member_cannot_publish_the_owners_private_runs_through_an_existing_link(
    client: TestClient, world: World
) -> None:
    secret = private_runs(client, world.alice, f"private {world.marker}")
    assert shared_run_ids(client, world.share_token) == set(world.run_ids)

    patch_config(client, world, world.carol, {"run_ids": secret})
    assert shared_run_ids(client, world.share_token) == set()
    patch_config(client, world, world.carol, {"filters": {}})
    assert shared_run_ids(client, world.share_token) == set(world.run_ids)
    # Carol's own view of the dashboard never showed them either.
    data = client.get(f"/api/v1/dashboards/{world.dashboard_id}/data", headers=world.carol.auth)
    assert {run["id"] for run in data.json()["runs"]} == set(world.run_ids)

    # The owner choosing her own runs may publish them: it is her link and her config.
    patch_config(client, world, world.alice, {"run_ids": secret})
    assert shared_run_ids(client, world.share_token) == set(secret)


def test_only_the_owner_or_a_team_owner_creates_links(
    client: TestClient, world: World, accounts_settings
) -> None:
    links = f"/api/v1/dashboards/{world.dashboard_id}/share-links"
    patch_config(client, world, world.carol, {"filters": {}})
    refused = client.post(links, headers=world.carol.auth)
    assert refused.status_code == 403 and "owner" in refused.json()["detail"]
    assert client.post(links, headers=world.victor.auth).status_code == 403

    olga = make_person(accounts_settings, "olga")
    join_team(client, world.alice, olga, world.team_id, "owner")
    made = client.post(links, headers=olga.auth)
    assert made.status_code == 201, made.text
    olgas_token = made.json()["token"]
    assert shared_run_ids(client, olgas_token) == set(world.run_ids)

    # A team owner's link never shows the dashboard owner's private runs, whoever chose them.
    secret = private_runs(client, world.alice, f"private {world.marker}")
    patch_config(client, world, world.alice, {"run_ids": [*secret, *world.run_ids]})
    assert shared_run_ids(client, olgas_token) == set(world.run_ids)
    patch_config(client, world, world.alice, {"filters": {}})
    assert shared_run_ids(client, olgas_token) == set(world.run_ids)


def test_the_rule_is_evaluated_at_every_read(
    client: TestClient, world: World, accounts_settings
) -> None:
    olga = make_person(accounts_settings, "olga")
    join_team(client, world.alice, olga, world.team_id, "owner")
    links = f"/api/v1/dashboards/{world.dashboard_id}/share-links"
    olgas_token = client.post(links, headers=olga.auth).json()["token"]
    assert shared_run_ids(client, olgas_token) == set(world.run_ids)

    # Carol sets the config, then leaves the team: what she may see no longer includes the
    # team's runs, so the links show nothing until someone who can see them sets it again.
    patch_config(client, world, world.carol, {"run_ids": world.run_ids})
    team = f"/api/v1/teams/{world.team_id}"
    assert client.delete(f"{team}/members/{world.carol.id}", headers=world.carol.auth).status_code
    assert shared_run_ids(client, world.share_token) == set()
    patch_config(client, world, world.alice, {"run_ids": world.run_ids})
    assert shared_run_ids(client, world.share_token) == set(world.run_ids)

    # A creator who is no longer a team owner no longer shares: the link stops working.
    demoted = client.patch(
        f"{team}/members/{olga.id}", json={"role": "member"}, headers=world.alice.auth
    )
    assert demoted.status_code == 200
    assert client.get(f"/api/v1/shared/{olgas_token}").status_code == 404
    # The dashboard leaving the team leaves Alice's own link working, on her own view.
    moved = client.patch(
        f"/api/v1/dashboards/{world.dashboard_id}", json={"team_id": None}, headers=world.alice.auth
    )
    assert moved.status_code == 200
    assert shared_run_ids(client, world.share_token) == set(world.run_ids)
