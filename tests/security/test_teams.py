"""Teams and roles: owners manage, members change shared work, viewers only read, outsiders
see nothing."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from fastapi.testclient import TestClient
from sqlalchemy import select, update

from backend.db.models import Run, Training
from backend.db.session import session_scope
from backend.settings import Settings
from tests.security.conftest import Person, World, join_team, make_person, role_of, spec


def test_team_members_see_shared_work_and_outsiders_do_not(
    client: TestClient, world: World
) -> None:
    for person in (world.alice, world.carol, world.victor):
        listed = client.get("/api/v1/experiments", headers=person.auth).json()
        assert [e["id"] for e in listed["items"]] == [world.experiment_id]
        assert (
            client.get(f"/api/v1/runs/{world.run_ids[0]}", headers=person.auth).status_code == 200
        )
        dashboards = client.get("/api/v1/dashboards", headers=person.auth).json()
        assert [d["id"] for d in dashboards] == [world.dashboard_id]
    assert client.get("/api/v1/experiments", headers=world.bob.auth).json()["total"] == 0
    assert client.get("/api/v1/runs", headers=world.bob.auth).json()["total"] == 0
    assert client.get(f"/api/v1/teams/{world.team_id}", headers=world.bob.auth).status_code == 404


def test_viewers_read_but_cannot_change(client: TestClient, world: World) -> None:
    victor = world.victor.auth
    cancel = client.post(f"/api/v1/experiments/{world.experiment_id}/cancel", headers=victor)
    assert cancel.status_code == 403
    rename = client.patch(
        f"/api/v1/dashboards/{world.dashboard_id}", json={"name": "mine now"}, headers=victor
    )
    assert rename.status_code == 403
    submit = client.post("/api/v1/experiments", json=spec("v", world.team_id), headers=victor)
    assert submit.status_code == 422
    assert submit.json()["detail"][0]["loc"] == ["body", "team_id"]
    add = client.post(
        f"/api/v1/teams/{world.team_id}/members",
        json={"email": world.bob.email, "role": "owner"},
        headers=victor,
    )
    assert add.status_code == 403


def test_members_change_shared_work_but_not_the_team(client: TestClient, world: World) -> None:
    carol = world.carol.auth
    rename = client.patch(
        f"/api/v1/dashboards/{world.dashboard_id}", json={"name": "renamed"}, headers=carol
    )
    assert rename.status_code == 200
    submit = client.post("/api/v1/experiments", json=spec("c", world.team_id), headers=carol)
    assert submit.status_code == 201
    promote = client.patch(
        f"/api/v1/teams/{world.team_id}/members/{world.carol.id}",
        json={"role": "owner"},
        headers=carol,
    )
    assert promote.status_code == 403
    cancel = client.post(f"/api/v1/experiments/{world.experiment_id}/cancel", headers=carol)
    assert cancel.status_code == 200


def test_owner_manages_roles_and_removal_ends_access(
    client: TestClient, world: World, accounts_settings: Settings
) -> None:
    alice = world.alice.auth
    team = f"/api/v1/teams/{world.team_id}"
    promoted = client.patch(
        f"{team}/members/{world.victor.id}", json={"role": "member"}, headers=alice
    )
    assert promoted.status_code == 200
    assert role_of(accounts_settings, world.team_id, world.victor.id) == "member"

    assert client.delete(f"{team}/members/{world.carol.id}", headers=alice).status_code == 204
    assert (
        client.get(
            f"/api/v1/experiments/{world.experiment_id}", headers=world.carol.auth
        ).status_code
        == 404
    )
    assert client.get(team, headers=world.carol.auth).status_code == 404

    # Leaving yourself needs no owner; the last owner cannot leave or step down.
    assert (
        client.delete(f"{team}/members/{world.victor.id}", headers=world.victor.auth).status_code
        == 204
    )
    last = client.delete(f"{team}/members/{world.alice.id}", headers=alice)
    assert last.status_code == 409 and "last owner" in last.json()["detail"]
    step_down = client.patch(
        f"{team}/members/{world.alice.id}", json={"role": "viewer"}, headers=alice
    )
    assert step_down.status_code == 422 and step_down.json()["detail"][0]["loc"] == ["body", "role"]


def test_team_input_errors_name_the_field(
    client: TestClient, world: World, accounts_settings: Settings
) -> None:
    alice = world.alice.auth
    taken = client.post("/api/v1/teams", json={"name": f"team {world.marker}"}, headers=alice)
    assert taken.status_code == 422 and taken.json()["detail"][0]["loc"] == ["body", "name"]
    bad_role = client.post(
        f"/api/v1/teams/{world.team_id}/members",
        json={"email": world.bob.email, "role": "emperor"},
        headers=alice,
    )
    assert bad_role.status_code == 422 and bad_role.json()["detail"][0]["loc"] == ["body", "role"]
    member = client.post(
        f"/api/v1/teams/{world.team_id}/members",
        json={"email": world.carol.email.upper(), "role": "viewer"},
        headers=alice,
    )
    assert member.status_code == 422 and member.json()["detail"][0]["loc"] == ["body", "email"]
    not_an_email = client.post(
        f"/api/v1/teams/{world.team_id}/members", json={"email": "nobody"}, headers=alice
    )
    assert not_an_email.status_code == 422
    assert not_an_email.json()["detail"][0]["loc"] == ["body", "email"]


def test_inviting_tells_nothing_about_who_has_an_account(
    client: TestClient, world: World, accounts_settings: Settings
) -> None:
    alice = world.alice.auth
    invite = f"/api/v1/teams/{world.team_id}/members"
    existing = client.post(invite, json={"email": world.bob.email, "role": "member"}, headers=alice)
    unknown = client.post(
        invite,
        json={"email": f"nobody-{world.marker}@example.org", "role": "member"},
        headers=alice,
    )
    assert existing.status_code == unknown.status_code == 201
    assert existing.headers.keys() == unknown.headers.keys()

    def shape(body: dict) -> dict:
        return {k: v for k, v in body.items() if k not in ("id", "email", "created_at")}

    assert shape(existing.json()) == shape(unknown.json())
    # Neither is a member before accepting.
    team = client.get(f"/api/v1/teams/{world.team_id}", headers=alice).json()
    assert world.bob.id not in {m["user_id"] for m in team["members"]}
    pending = client.get(f"/api/v1/teams/{world.team_id}/invitations", headers=alice).json()
    assert {world.bob.email, f"nobody-{world.marker}@example.org"} <= {i["email"] for i in pending}


def test_the_invitee_accepts_or_declines_and_nobody_else_can(
    client: TestClient, world: World, accounts_settings: Settings
) -> None:
    alice, bob = world.alice.auth, world.bob.auth
    invite = f"/api/v1/teams/{world.team_id}/members"
    invitation = client.post(
        invite, json={"email": world.bob.email, "role": "viewer"}, headers=alice
    ).json()
    assert client.get(f"/api/v1/experiments/{world.experiment_id}", headers=bob).status_code == 404
    mine = client.get("/api/v1/invitations", headers=bob).json()
    assert [(i["id"], i["team_name"], i["role"]) for i in mine] == [
        (invitation["id"], f"team {world.marker}", "viewer")
    ]
    # Someone else cannot answer Bob's invitation, nor see it.
    dave = make_person(accounts_settings, "dave")
    assert client.get("/api/v1/invitations", headers=dave.auth).json() == []
    for answer in ("accept", "decline"):
        stolen = client.post(f"/api/v1/invitations/{invitation['id']}/{answer}", headers=dave.auth)
        assert stolen.status_code == 404
    accepted = client.post(f"/api/v1/invitations/{invitation['id']}/accept", headers=bob)
    assert accepted.status_code == 200 and accepted.json()["role"] == "viewer"
    assert role_of(accounts_settings, world.team_id, world.bob.id) == "viewer"
    assert client.get(f"/api/v1/experiments/{world.experiment_id}", headers=bob).status_code == 200
    assert client.get("/api/v1/invitations", headers=bob).json() == []
    again = client.post(f"/api/v1/invitations/{invitation['id']}/accept", headers=bob)
    assert again.status_code == 404

    # Declining leaves no trace and no membership; the owner may withdraw an invitation.
    declined = client.post(invite, json={"email": dave.email, "role": "owner"}, headers=alice)
    answer = client.post(f"/api/v1/invitations/{declined.json()['id']}/decline", headers=dave.auth)
    assert answer.status_code == 204
    assert role_of(accounts_settings, world.team_id, dave.id) is None
    withdrawn = client.post(invite, json={"email": dave.email, "role": "owner"}, headers=alice)
    path = f"/api/v1/teams/{world.team_id}/invitations/{withdrawn.json()['id']}"
    assert client.delete(path, headers=world.carol.auth).status_code == 403
    assert client.delete(path, headers=alice).status_code == 204
    assert client.get("/api/v1/invitations", headers=dave.auth).json() == []


def test_deleting_a_team_keeps_the_work_with_its_owner(client: TestClient, world: World) -> None:
    team = f"/api/v1/teams/{world.team_id}"
    confirmed = {"confirm": f"team {world.marker}"}
    assert client.delete(team, params=confirmed, headers=world.carol.auth).status_code == 403
    assert client.delete(team, params=confirmed, headers=world.alice.auth).status_code == 204
    assert (
        client.get(
            f"/api/v1/experiments/{world.experiment_id}", headers=world.alice.auth
        ).status_code
        == 200
    )
    assert (
        client.get(
            f"/api/v1/experiments/{world.experiment_id}", headers=world.carol.auth
        ).status_code
        == 404
    )


def test_deleting_a_team_needs_its_name_as_confirmation(
    client: TestClient, world: World, accounts_settings: Settings
) -> None:
    """An owner invited by the team's maker deletes it only by naming it."""
    olga = make_person(accounts_settings, "olga")
    join_team(client, world.alice, olga, world.team_id, "owner")
    team = f"/api/v1/teams/{world.team_id}"
    for params in ({}, {"confirm": ""}, {"confirm": "another team"}):
        refused = client.delete(team, params=params, headers=olga.auth)
        assert refused.status_code == 422, refused.text
        assert refused.json()["detail"][0]["loc"] == ["query", "confirm"]
    assert client.get(team, headers=world.alice.auth).status_code == 200
    deleted = client.delete(team, params={"confirm": f"team {world.marker}"}, headers=olga.auth)
    assert deleted.status_code == 204
    assert client.get(team, headers=world.alice.auth).status_code == 404


def test_owners_demoting_each_other_at_once_leave_the_team_an_owner(
    client: TestClient, world: World, accounts_settings: Settings
) -> None:
    olga = make_person(accounts_settings, "olga")
    join_team(client, world.alice, olga, world.team_id, "owner")
    members = f"/api/v1/teams/{world.team_id}/members"
    for _ in range(8):
        start = threading.Barrier(2)

        def demote(by: Person, whom: Person, start: threading.Barrier = start) -> int:
            start.wait()
            path = f"{members}/{whom.id}"
            return client.patch(path, json={"role": "member"}, headers=by.auth).status_code

        with ThreadPoolExecutor(2) as pool:
            answers = sorted(pool.map(demote, (world.alice, olga), (olga, world.alice)))
        assert answers in ([200, 403], [200, 422]), answers
        roles = {role_of(accounts_settings, world.team_id, p.id) for p in (world.alice, olga)}
        assert roles == {"owner", "member"}
        # Make both owners again for the next round.
        demoted = (
            olga if role_of(accounts_settings, world.team_id, olga.id) == "member" else world.alice
        )
        keeper = world.alice if demoted is olga else olga
        restored = client.patch(
            f"{members}/{demoted.id}", json={"role": "owner"}, headers=keeper.auth
        )
        assert restored.status_code == 200


def test_creating_a_team_tells_nothing_about_other_peoples_team_names(
    client: TestClient, world: World
) -> None:
    name = f"team {world.marker}"  # Alice's team's name
    bobs = client.post("/api/v1/teams", json={"name": name}, headers=world.bob.auth)
    assert bobs.status_code == 201, bobs.text
    assert bobs.json()["id"] != world.team_id and bobs.json()["name"] == name
    # Names are unique among one person's own teams only.
    again = client.post("/api/v1/teams", json={"name": f" {name} "}, headers=world.bob.auth)
    assert again.status_code == 422 and again.json()["detail"][0]["loc"] == ["body", "name"]
    # Each sees their own team under the name.
    for person, team_id in ((world.alice, world.team_id), (world.bob, bobs.json()["id"])):
        teams = client.get("/api/v1/teams", headers=person.auth).json()
        assert [(t["id"], t["name"]) for t in teams] == [(team_id, name)]


def test_team_viewers_do_not_see_which_worker_ran_an_attempt(
    client: TestClient, world: World, accounts_settings: Settings
) -> None:
    run_id = world.run_ids[0]
    with session_scope(accounts_settings.effective_database_url) as db:
        db.execute(update(Run).where(Run.id == run_id).values(status="failed"))
        training_id = db.scalar(select(Run.training_id).where(Run.id == run_id))
        db.execute(
            update(Training)
            .where(Training.id == training_id)
            .values(status="failed", leased_by=f"host-{world.marker}:4242")
        )
    retried = client.post(f"/api/v1/runs/{run_id}/retry", headers=world.carol.auth)
    assert retried.status_code == 200, retried.text

    def attempts(person: Person) -> list[dict]:
        answer = client.get(f"/api/v1/runs/{run_id}", headers=person.auth)
        assert answer.status_code == 200, answer.text
        return answer.json()["attempts"]

    for editor in (world.alice, world.carol):
        assert [a["worker"] for a in attempts(editor)] == [f"host-{world.marker}:4242"]
    shown = attempts(world.victor)
    assert [(a["attempt"], a["status"], a["worker"]) for a in shown] == [(1, "failed", None)]


def test_a_co_owner_may_remove_the_teams_creator_who_keeps_their_own_work(
    client: TestClient, world: World
) -> None:
    """Owners are equals (the open choice in backend/api/routes/teams.py): a co-owner removes
    the one who made the team; the team goes on with its other owner, and the creator's
    experiments stay theirs and the team's, as any removed member's do."""
    team = f"/api/v1/teams/{world.team_id}"
    promoted = client.patch(
        f"{team}/members/{world.carol.id}", json={"role": "owner"}, headers=world.alice.auth
    )
    assert promoted.status_code == 200, promoted.text
    removed = client.delete(f"{team}/members/{world.alice.id}", headers=world.carol.auth)
    assert removed.status_code == 204, removed.text
    assert client.get(team, headers=world.alice.auth).status_code == 404
    members = client.get(team, headers=world.carol.auth).json()["members"]
    assert {(m["user_id"], m["role"]) for m in members} == {
        (world.carol.id, "owner"),
        (world.victor.id, "viewer"),
    }
    experiment = f"/api/v1/experiments/{world.experiment_id}"
    assert client.get(experiment, headers=world.alice.auth).status_code == 200
    assert client.get(experiment, headers=world.carol.auth).status_code == 200
    # The last owner still cannot be removed, creator or not.
    last = client.delete(f"{team}/members/{world.carol.id}", headers=world.carol.auth)
    assert last.status_code == 409 and "last owner" in last.json()["detail"]
