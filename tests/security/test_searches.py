"""Who may see and change a design search: as its experiment. Another user gets 404 on every
one of its routes and changes nothing; a team viewer reads it but may not cancel it or turn
its designs into runs (403), though they may save a design as their own accelerator, and the
search says so (`can_edit`); saved accelerators are their owner's alone."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from backend.api.app import create_app
from backend.db.models import DesignSearchRow, Run, Training
from backend.db.session import session_scope
from backend.settings import Settings
from tests.security.conftest import BASE_URL, World, spec


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


def test_a_members_runs_from_a_design_count_against_the_experiment_owner(
    world: World, accounts_settings: Settings
) -> None:
    """Carol (a member) turns a design of Alice's search into runs of Alice's experiment: the
    runs are Alice's, so Alice's queued-plus-running quota decides, not Carol's."""
    url = accounts_settings.effective_database_url
    with session_scope(url) as db:  # the experiment's trainings stored their workloads
        db.execute(
            update(Training)
            .where(Training.experiment_id == world.experiment_id)
            .values(status="done", workload={"layers": []})
        )
    limited = accounts_settings.model_copy(update={"max_active_runs_per_user": 3})
    design = f"/api/v1/searches/{world.ids['search_id']}/designs/0/runs"
    with TestClient(create_app(limited), base_url=BASE_URL) as client:
        alices = client.post("/api/v1/experiments", json=spec("alice's"), headers=world.alice.auth)
        assert alices.status_code == 201, alices.text  # 2 runs queued: alice has 2 of 3
        carols = client.post("/api/v1/experiments", json=spec("carol's"), headers=world.carol.auth)
        assert carols.status_code == 201, carols.text  # carol has 2 of 3 too

        over = client.post(design, headers=world.carol.auth)
        assert over.status_code == 429, over.text
        assert over.json()["detail"] == (
            "this design adds 2 runs to its owner's 2 queued or running ones, over the limit of "
            "3 per user; wait for runs to finish or cancel some"
        )
        with session_scope(url) as db:
            assert db.scalar(select(func.count()).select_from(Run)) == 2 + 2 + 2

        # Alice's queue empties: the design's runs fit her quota, whatever Carol has queued.
        cancel = client.post(
            f"/api/v1/experiments/{alices.json()['id']}/cancel", headers=world.alice.auth
        )
        assert cancel.status_code == 200, cancel.text
        made = client.post(design, headers=world.carol.auth)
        assert made.status_code == 201, made.text
        assert {run["experiment_id"] for run in made.json()} == {world.experiment_id}
        again = client.post("/api/v1/experiments", json=spec("alice's"), headers=world.alice.auth)
        assert again.status_code == 429 and "your 2 queued or running" in again.json()["detail"]
