"""Every route of the OpenAPI schema, walked: anonymous requests are refused (except health,
login, share links and the technique table, which only describes the public schema), and nobody
reaches another user's objects (no IDOR; 404, no leak).

A new route with a path parameter or body this table does not know fails the test, so each
route that lands is audited here.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from backend.db.models import Run
from backend.db.session import session_scope
from backend.settings import Settings
from tests.security.conftest import PASSWORD, Person, World, spec

PUBLIC = {
    ("GET", "/api/v1/health"),
    ("POST", "/api/v1/auth/login"),
    ("GET", "/api/v1/shared/{token}"),
    ("GET", "/api/v1/techniques"),
    ("GET", "/api/v1/figures"),
}
# Streams until the experiment finishes; its refusals are checked, not its stream.
STREAMING = {("GET", "/api/v1/experiments/{experiment_id}/events")}


def path_values(world: World) -> dict[str, Any]:
    """Alice's object behind each path parameter name."""
    return {
        "experiment_id": world.experiment_id,
        "run_id": world.run_ids[0],
        "team_id": world.team_id,
        "user_id": world.carol.id,
        "token_id": world.alice_token_id,
        "dashboard_id": world.dashboard_id,
        "link_id": world.share_link_id,
        "token": world.share_token,
        "invitation_id": world.invitation_id,
        **world.ids,
    }


def body_for(method: str, path: str, world: World) -> Any:
    bodies: dict[tuple[str, str], Any] = {
        ("POST", "/api/v1/auth/login"): {"email": world.alice.email, "password": PASSWORD},
        ("POST", "/api/v1/tokens"): {"name": "stolen"},
        ("POST", "/api/v1/users"): {"email": "x@example.org", "password": "long enough pw"},
        ("POST", "/api/v1/teams"): {"name": "another team"},
        ("POST", "/api/v1/teams/{team_id}/members"): {"email": "x@example.org", "role": "owner"},
        ("PATCH", "/api/v1/teams/{team_id}/members/{user_id}"): {"role": "viewer"},
        ("POST", "/api/v1/experiments/preview"): spec("preview"),
        ("POST", "/api/v1/experiments"): spec("sneaky"),
        ("POST", "/api/v1/dashboards"): {"name": "sneaky"},
        ("PATCH", "/api/v1/dashboards/{dashboard_id}"): {"name": "taken over"},
        ("PATCH", "/api/v1/experiments/{experiment_id}"): {"tags": ["taken"], "notes": "over"},
        ("PATCH", "/api/v1/runs/{run_id}"): {"tags": ["taken"], "notes": "over"},
        ("PUT", "/api/v1/preferences"): {"run_table_columns": ["id"]},
        ("POST", "/api/v1/experiments/{experiment_id}/searches"): {
            "base": "edge",
            "parameters": {"rows": {"values": [8]}},
            "mode": "grid",
        },
        ("POST", "/api/v1/searches/{search_id}/designs/{design_index}/accelerator"): {
            "name": "stolen"
        },
    }
    return bodies.get((method, path))


def operations(client: TestClient) -> list[tuple[str, str, dict[str, Any]]]:
    schema = client.app.openapi()  # type: ignore[attr-defined]
    return [
        (method.upper(), path, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    ]


def request_for(method: str, path: str, operation: dict[str, Any], world: World) -> dict[str, Any]:
    values = path_values(world)
    url = path
    query: dict[str, Any] = {}
    for parameter in operation.get("parameters", []):
        name = parameter["name"]
        if parameter["in"] == "path":
            assert name in values, f"{method} {path}: no test value for path parameter '{name}'"
            url = url.replace("{" + name + "}", str(values[name]))
        elif parameter["in"] == "query" and parameter.get("required"):
            required = {"ids": world.run_ids, "by": "experiment_id", "confirm": "x"}
            assert name in required, f"{method} {path}: no test value for query parameter '{name}'"
            query[name] = required[name]
    body = body_for(method, path, world)
    if "requestBody" in operation:
        assert body is not None, f"{method} {path}: add an example body to body_for()"
    return {"method": method, "url": url, "params": query, "json": body}


def test_anonymous_requests_are_refused(client: TestClient, world: World) -> None:
    refused = []
    for method, path, operation in operations(client):
        if (method, path) in PUBLIC:
            continue
        response = client.request(**request_for(method, path, operation, world))
        if response.status_code != 401:
            refused.append(f"{method} {path}: {response.status_code}")
    assert refused == [], "anonymous requests not refused with 401"
    assert client.get("/api/v1/health").status_code == 200
    shared = client.get(f"/api/v1/shared/{world.share_token}")
    assert shared.status_code == 200 and shared.json()["name"] == f"dashboard {world.marker}"
    assert client.get("/api/v1/shared/not-a-token").status_code == 404


def test_another_users_objects_are_404_on_every_route(client: TestClient, world: World) -> None:
    bob = world.bob.auth
    leaks = []
    for method, path, operation in operations(client):
        has_path_ids = any(p["in"] == "path" for p in operation.get("parameters", []))
        if not has_path_ids or (method, path) in PUBLIC:
            continue
        response = client.request(**request_for(method, path, operation, world), headers=bob)
        if response.status_code != 404 or world.marker in response.text:
            leaks.append(f"{method} {path}: {response.status_code} {response.text[:120]}")
    assert leaks == []

    # The ids were real: Alice reaches each of them, and nothing of hers changed.
    alice = world.alice.auth
    for method, path, operation in operations(client):
        has_path_ids = any(p["in"] == "path" for p in operation.get("parameters", []))
        if method == "GET" and has_path_ids and (method, path) not in STREAMING:
            response = client.request(**request_for(method, path, operation, world), headers=alice)
            assert response.status_code == 200, (path, response.text)
    team = client.get(f"/api/v1/teams/{world.team_id}", headers=alice).json()
    assert {m["role"] for m in team["members"] if m["user_id"] == world.carol.id} == {"member"}
    dashboard = client.get(f"/api/v1/dashboards/{world.dashboard_id}", headers=alice).json()
    assert dashboard["name"] == f"dashboard {world.marker}"
    assert client.get(f"/api/v1/shared/{world.share_token}").status_code == 200


def _leaks(response_text: str, content_type: str, world: World) -> list[str]:
    found = [world.marker] if world.marker in response_text else []
    if content_type.startswith("text/csv"):
        rows = csv.DictReader(io.StringIO(response_text))
        found += [f"run {r['id']}" for r in rows if r["experiment_id"] == str(world.experiment_id)]
        return found
    if not content_type.startswith("application/json"):
        return found

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("experiment_id") == world.experiment_id:
                found.append(f"experiment {world.experiment_id}")
            if value.get("run_id") in world.run_ids:
                found.append(f"run {value['run_id']}")
            found.extend(f"run {i}" for i in value.get("run_ids", []) if i in world.run_ids)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(json.loads(response_text))
    return found


def test_collections_hold_only_your_own_and_your_teams_objects(
    client: TestClient, world: World
) -> None:
    leaked, shown_to_alice = [], []
    for method, path, operation in operations(client):
        has_path_ids = any(p["in"] == "path" for p in operation.get("parameters", []))
        if method != "GET" or has_path_ids:
            continue
        request = request_for(method, path, operation, world)
        as_bob = client.request(**request, headers=world.bob.auth)
        assert as_bob.status_code in (200, 404), (path, as_bob.text)
        content_type = as_bob.headers.get("content-type", "")
        if as_bob.status_code == 200 and _leaks(as_bob.text, content_type, world):
            leaked.append(f"{path}: {_leaks(as_bob.text, content_type, world)}")
        as_alice = client.request(**request, headers=world.alice.auth)
        if _leaks(as_alice.text, as_alice.headers.get("content-type", ""), world):
            shown_to_alice.append(path)
    assert leaked == []
    assert set(shown_to_alice) >= {
        "/api/v1/experiments",
        "/api/v1/runs",
        "/api/v1/runs/compare",
        "/api/v1/runs/pareto",
        "/api/v1/runs/groups",
        "/api/v1/runs/export",
        "/api/v1/dashboards",
        "/api/v1/chart-data",
        "/api/v1/teams",
    }


@pytest.mark.parametrize("who", ["bob", "victor"])
def test_others_cannot_attach_work_to_a_team_they_do_not_edit(
    client: TestClient, world: World, who: str
) -> None:
    person = getattr(world, who)
    experiment = client.post(
        "/api/v1/experiments", json=spec("x", world.team_id), headers=person.auth
    )
    dashboard = client.post(
        "/api/v1/dashboards", json={"name": "x", "team_id": world.team_id}, headers=person.auth
    )
    for response in (experiment, dashboard):
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["body", "team_id"]


def test_a_dashboard_or_share_link_cannot_launder_someone_elses_runs(
    client: TestClient, world: World
) -> None:
    bob = world.bob.auth
    made = client.post(
        "/api/v1/dashboards", json={"name": "b", "config": {"run_ids": world.run_ids}}, headers=bob
    )
    assert made.status_code == 201
    assert client.get(f"/api/v1/dashboards/{made.json()['id']}/data", headers=bob).json() == {
        "runs": [],
        "design_points": [],
    }
    link = client.post(f"/api/v1/dashboards/{made.json()['id']}/share-links", headers=bob).json()
    shared = client.get(f"/api/v1/shared/{link['token']}").json()
    assert shared["data"]["runs"] == []
    # A share link opens one dashboard to read, nothing else.
    as_bearer = {"Authorization": f"Bearer {world.share_token}"}
    assert client.get("/api/v1/experiments", headers=as_bearer).status_code == 401
    assert (
        client.get(f"/api/v1/dashboards/{world.dashboard_id}", headers=as_bearer).status_code == 401
    )


def test_preferences_are_each_users_own(client: TestClient, world: World) -> None:
    chosen = {"run_table_columns": ["id", "speedup"]}
    assert client.put("/api/v1/preferences", json=chosen, headers=world.alice.auth).json() == chosen
    bob = client.get("/api/v1/preferences", headers=world.bob.auth).json()
    assert bob == {"run_table_columns": None}
    assert client.get("/api/v1/preferences", headers=world.alice.auth).json() == chosen


def test_run_summaries_count_only_visible_runs(client: TestClient, world: World) -> None:
    by_experiment = {"by": "experiment_id"}
    alice = client.get("/api/v1/runs/summary", params=by_experiment, headers=world.alice.auth)
    bob = client.get("/api/v1/runs/summary", params=by_experiment, headers=world.bob.auth)
    assert world.experiment_id in [group["value"] for group in alice.json()]
    assert world.experiment_id not in [group["value"] for group in bob.json()]


def test_only_the_owner_deletes_and_annotations_need_an_editor(
    client: TestClient, world: World
) -> None:
    experiment = f"/api/v1/experiments/{world.experiment_id}"
    run = f"/api/v1/runs/{world.run_ids[0]}"
    for person in (world.carol, world.victor):  # team member and team viewer
        assert client.delete(experiment, headers=person.auth).status_code == 403
        assert client.delete(run, headers=person.auth).status_code == 403
    assert client.patch(run, json={"notes": "n"}, headers=world.victor.auth).status_code == 403
    assert client.patch(run, json={"notes": "n"}, headers=world.carol.auth).status_code == 200
    assert client.get(experiment, headers=world.alice.auth).status_code == 200
    assert client.get(run, headers=world.alice.auth).json()["notes"] == "n"


def test_retry_needs_an_editor_of_the_run(
    client: TestClient, world: World, accounts_settings: Settings
) -> None:
    retry = f"/api/v1/runs/{world.run_ids[0]}/retry"
    assert client.post(retry, headers=world.bob.auth).status_code == 404  # not his to see
    assert client.post(retry, headers=world.victor.auth).status_code == 403  # a viewer
    finished = client.post(retry, headers=world.carol.auth)  # a member, but the run is done
    assert finished.status_code == 409 and "only a failed or cancelled run" in finished.text
    with session_scope(accounts_settings.effective_database_url) as db:
        db.execute(update(Run).where(Run.id == world.run_ids[0]).values(status="failed"))
    assert client.post(retry, headers=world.bob.auth).status_code == 404
    assert client.post(retry, headers=world.victor.auth).status_code == 403
    retried = client.post(retry, headers=world.carol.auth)
    assert retried.status_code == 200 and retried.json()["attempt"] == 2


def test_papers_count_only_the_miniatures_you_may_see(client: TestClient, world: World) -> None:
    papers = client.get("/api/v1/papers", headers=world.alice.auth).json()
    adagp = next(paper for paper in papers if paper["key"] == "adagp")
    made = client.post("/api/v1/experiments", json=adagp["miniature"], headers=world.alice.auth)
    assert made.status_code == 201, made.text

    def experiments_of(person: Person) -> list[int]:
        answer = client.get("/api/v1/papers", headers=person.auth).json()
        return next(paper for paper in answer if paper["key"] == "adagp")["experiment_ids"]

    assert experiments_of(world.alice) == [made.json()["id"]]
    assert experiments_of(world.bob) == []
