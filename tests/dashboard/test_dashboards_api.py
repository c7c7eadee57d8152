"""Dashboards on PostgreSQL: create, read, edit, delete; bad input is 422 naming the field;
other people's dashboards are 404; a team shares them, its viewers cannot change them."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import update

from backend.db.models import Team, TeamMembership
from backend.db.session import session_scope
from backend.settings import Settings
from tests.dashboard.conftest import World

CHARTS = ["pareto", "cycles", "energy", "layer_cycles", "macs", "curves", "parallel", "roofline"]


def create(client: TestClient, world: World, **body: object) -> dict:
    payload = {"name": "my view", "config": {"run_ids": world.run_ids, "charts": ["pareto"]}}
    payload.update(body)
    response = client.post("/api/v1/dashboards", json=payload, headers=world.owner.auth)
    assert response.status_code == 201, response.text
    return response.json()


def test_create_read_edit_delete(client: TestClient, world: World) -> None:
    auth = world.owner.auth
    made = create(client, world)
    assert len(made["id"]) == 12 and made["can_edit"] and made["owner_id"] == world.owner.id
    assert made["config"]["run_ids"] == world.run_ids
    assert client.get(f"/api/v1/dashboards/{made['id']}", headers=auth).json()["name"] == "my view"
    listed = client.get("/api/v1/dashboards", headers=auth).json()
    assert [d["id"] for d in listed] == [made["id"]]

    changed = client.patch(
        f"/api/v1/dashboards/{made['id']}",
        json={"name": "renamed", "config": {"run_ids": world.run_ids[:2], "charts": CHARTS}},
        headers=auth,
    ).json()
    assert changed["name"] == "renamed"
    assert changed["config"]["run_ids"] == world.run_ids[:2]
    assert changed["config"]["charts"] == CHARTS

    assert client.delete(f"/api/v1/dashboards/{made['id']}", headers=auth).status_code == 204
    assert client.get(f"/api/v1/dashboards/{made['id']}", headers=auth).status_code == 404


def test_default_config_shows_every_chart(client: TestClient, world: World) -> None:
    response = client.post("/api/v1/dashboards", json={"name": "all"}, headers=world.owner.auth)
    assert response.json()["config"]["charts"] == CHARTS


def test_bad_input_is_422_naming_the_field(client: TestClient, world: World) -> None:
    auth = world.owner.auth
    cases = [
        ({"name": ""}, ["body", "name"]),
        ({"name": "x", "config": {"charts": ["pie"]}}, ["body", "config", "charts", 0]),
        ({"name": "x", "config": {"run_ids": ["one"]}}, ["body", "config", "run_ids", 0]),
        ({"name": "x", "config": {"colour": "red"}}, ["body", "config", "colour"]),
        (
            {"name": "x", "config": {"filters": {"speed": [1]}}},
            ["body", "config", "filters", "speed"],
        ),
        ({"name": "x", "team_id": 999_999}, ["body", "team_id"]),
    ]
    for body, loc in cases:
        response = client.post("/api/v1/dashboards", json=body, headers=auth)
        assert response.status_code == 422, body
        assert loc in [error["loc"] for error in response.json()["detail"]], response.json()
    made = create(client, world)
    response = client.patch(f"/api/v1/dashboards/{made['id']}", json={"name": None}, headers=auth)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "name"]


def test_other_peoples_dashboards_are_404(client: TestClient, world: World) -> None:
    made = create(client, world)
    path = f"/api/v1/dashboards/{made['id']}"
    stranger = world.stranger.auth
    assert client.get(path, headers=stranger).status_code == 404
    assert client.get(f"{path}/data", headers=stranger).status_code == 404
    assert client.patch(path, json={"name": "mine"}, headers=stranger).status_code == 404
    assert client.delete(path, headers=stranger).status_code == 404
    assert client.post(f"{path}/share-links", headers=stranger).status_code == 404
    assert client.get(f"{path}/share-links", headers=stranger).status_code == 404
    assert client.get("/api/v1/dashboards", headers=stranger).json() == []
    assert (
        client.get("/api/v1/dashboards/nosuchid0000", headers=world.owner.auth).status_code == 404
    )
    # Nobody is anybody without credentials.
    assert client.get(path).status_code == 401


def test_team_members_see_viewers_cannot_change(client: TestClient, world: World) -> None:
    made = create(client, world, team_id=world.team_id)
    path = f"/api/v1/dashboards/{made['id']}"
    seen = client.get(path, headers=world.teammate.auth)
    assert seen.status_code == 200 and seen.json()["can_edit"] is False
    assert client.patch(path, json={"name": "x"}, headers=world.teammate.auth).status_code == 403
    assert client.post(f"{path}/share-links", headers=world.teammate.auth).status_code == 403
    # The viewer sees the runs the team shares; the stranger sees nothing.
    assert client.get(path, headers=world.stranger.auth).status_code == 404
    unshared = client.patch(path, json={"team_id": None}, headers=world.owner.auth).json()
    assert unshared["team_id"] is None
    assert client.get(path, headers=world.teammate.auth).status_code == 404


def test_chart_data_has_what_the_charts_need(client: TestClient, world: World) -> None:
    response = client.get(
        "/api/v1/chart-data", params={"ids": world.run_ids}, headers=world.owner.auth
    )
    runs = {r["id"]: r for r in response.json()["runs"]}
    assert set(runs) == set(world.run_ids)
    baseline = runs[world.baseline_id]
    assert baseline["accuracy_drop"] == 0 and baseline["speedup"] == 1
    assert baseline["accelerator"]["rows"] == 16 and baseline["accelerator"]["clock_mhz"] == 200
    assert baseline["summary"]["energy_by_operand"]["ifmap"] == 1e6
    # One design point per seed group (one seed each here); speedup grows and accuracy falls
    # as signature bits shrink: every technique point is on the front, the baseline never.
    points = {p["group"]: p for p in response.json()["design_points"]}
    assert set(points) == {r["group"] for r in runs.values()}
    for point in points.values():
        run = runs[point["run_ids"][0]]
        assert point["speedup"]["mean"] == run["speedup"] and point["speedup"]["n"] == 1
        assert point["on_front"] is not point["is_baseline"]
    by_bits = {r["params"].get("mercury.signature_bits"): r for r in runs.values()}
    assert abs(by_bits[8]["accuracy_drop"] - 0.05) < 1e-9
    # Each signature length is its own seed group, labelled with the key /runs/groups uses.
    assert len({r["group"] for r in runs.values()}) == len(runs)
    groups = client.get(
        "/api/v1/runs/groups",
        params={"experiment_id": baseline["experiment_id"]},
        headers=world.owner.auth,
    ).json()
    assert {g["key"] for g in groups} == {r["group"] for r in runs.values()}
    # Runs you cannot see are left out, not leaked.
    hidden = client.get(
        "/api/v1/chart-data", params={"ids": world.run_ids}, headers=world.stranger.auth
    )
    assert hidden.json()["runs"] == []


def test_dashboard_data_follows_its_filters_when_no_runs_are_chosen(
    client: TestClient, world: World
) -> None:
    made = create(
        client,
        world,
        config={"filters": {"param": ["mercury.signature_bits:16"]}, "charts": ["macs"]},
    )
    data = client.get(f"/api/v1/dashboards/{made['id']}/data", headers=world.owner.auth).json()
    assert [r["params"]["mercury.signature_bits"] for r in data["runs"]] == [16]


def test_pinned_runs_can_be_combined_with_the_filters(client: TestClient, world: World) -> None:
    pinned = [world.baseline_id]
    mercury = sorted(set(world.run_ids) - set(pinned))
    filters = {"technique": ["mercury"], "sort": "id"}
    only_pinned = create(client, world, config={"run_ids": pinned, "filters": filters})
    combined = create(
        client, world, config={"run_ids": pinned, "filters": filters, "add_filtered_runs": True}
    )
    auth = world.owner.auth

    def shown(dashboard: dict) -> list[int]:
        data = client.get(f"/api/v1/dashboards/{dashboard['id']}/data", headers=auth).json()
        return [run["id"] for run in data["runs"]]

    assert shown(only_pinned) == pinned  # as before: pins win over the filters
    assert shown(combined) == pinned + mercury  # pinned first, then the filter's matches
    pinned_twice = create(
        client,
        world,
        config={"run_ids": mercury[:1], "filters": filters, "add_filtered_runs": True},
    )
    assert shown(pinned_twice) == mercury  # a run both pinned and matched appears once


def test_text_blocks_are_rendered_without_running_anything(
    client: TestClient, world: World
) -> None:
    texts = [
        {
            "position": 1,
            "markdown": "## Why MERCURY wins\n\n| bits | speedup |\n|---|---|\n| 8 | 1.9 |",
        },
        {"position": 0, "markdown": "<script>alert(1)</script> [x](javascript:alert(1)) <b>hi</b>"},
    ]
    made = create(client, world, config={"run_ids": world.run_ids, "texts": texts})
    rendered = {block["position"]: block["html"] for block in made["texts"]}
    assert "<h2>Why MERCURY wins</h2>" in rendered[1] and "<td>1.9</td>" in rendered[1]
    hostile = rendered[0]
    assert "<script" not in hostile and "&lt;script&gt;" in hostile
    assert "<b>" not in hostile and "href" not in hostile  # no tag, no javascript: link
    link = client.post(f"/api/v1/dashboards/{made['id']}/share-links", headers=world.owner.auth)
    shared = client.get(f"/api/v1/shared/{link.json()['token']}").json()
    assert shared["texts"] == made["texts"]
    too_long = client.post(
        "/api/v1/dashboards",
        json={"name": "x", "config": {"texts": [{"position": 0, "markdown": "x" * 20_001}]}},
        headers=world.owner.auth,
    )
    assert too_long.status_code == 422
    assert too_long.json()["detail"][0]["loc"] == ["body", "config", "texts", 0, "markdown"]


def test_a_team_member_edits_but_does_not_move_delete_or_see_links(
    client: TestClient, world: World, settings: Settings
) -> None:
    made = create(client, world, team_id=world.team_id)
    path = f"/api/v1/dashboards/{made['id']}"
    link = client.post(f"{path}/share-links", headers=world.owner.auth)
    assert link.status_code == 201
    with session_scope(settings.effective_database_url) as db:
        db.execute(
            update(TeamMembership)
            .where(TeamMembership.user_id == world.teammate.id)
            .values(role="member")
        )
        own = Team(name=f"tess's own {made['id']}")
        db.add(own)
        db.flush()
        db.add(TeamMembership(team_id=own.id, user_id=world.teammate.id, role="owner"))
        own_id = own.id
    tess = world.teammate.auth
    seen = client.get(path, headers=tess).json()
    assert (seen["can_edit"], seen["can_manage"]) == (True, False)
    assert client.patch(path, json={"name": "renamed"}, headers=tess).status_code == 200
    assert client.patch(path, json={"team_id": own_id}, headers=tess).status_code == 403
    assert client.patch(path, json={"team_id": None}, headers=tess).status_code == 403
    assert client.get(f"{path}/share-links", headers=tess).status_code == 403
    assert client.delete(path, headers=tess).status_code == 403
    kept = client.get(path, headers=world.owner.auth).json()
    assert (kept["name"], kept["team_id"]) == ("renamed", world.team_id)
    assert client.get(f"/api/v1/shared/{link.json()['token']}").status_code == 200
