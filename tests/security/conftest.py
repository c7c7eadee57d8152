"""A multi-user server on real PostgreSQL and Redis, and a small world of people and their work.

Alice owns an experiment (shared with her team), its runs (some finished), a dashboard with a
share link, and an API token. Carol is a member and Victor a viewer of Alice's team (each
accepted Alice's invitation); a newcomer without an account has a pending one. Bob belongs to
nothing. Every name Alice chose carries MARKER, so a leak shows up in any body.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from backend.api.app import create_app
from backend.auth.tokens import create_token
from backend.auth.users import create_user
from backend.db.models import DesignSearchRow, Run, SavedAccelerator, TeamMembership
from backend.db.session import session_scope
from backend.settings import Settings
from backend.specs.accelerator import PRESETS
from backend.specs.design_search import DesignSearch
from tests.conftest import (
    accounts_service_settings,
    free_port,
    orrery_env,
    stop_process,
    wait_for_http,
)
from tests.pipeline.conftest import TINY_TRAINING

BASE_URL = "https://testserver"  # the session cookie is Secure
PASSWORD = "a long enough password"


@pytest.fixture
def accounts_settings(postgres_url: str, redis_db_url: str, tmp_path: Path) -> Settings:
    return accounts_service_settings(postgres_url, redis_db_url, tmp_path)


@pytest.fixture
def client(accounts_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(accounts_settings), base_url=BASE_URL) as test_client:
        yield test_client


@dataclass
class Person:
    id: int
    email: str
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def make_person(settings: Settings, name: str, admin: bool = False) -> Person:
    with session_scope(settings.effective_database_url) as db:
        user = create_user(db, f"{name}-{uuid.uuid4().hex[:6]}@example.org", PASSWORD, name, admin)
        _, secret = create_token(db, user, f"{name}'s laptop")
        return Person(user.id, user.email, secret)


@dataclass
class World:
    marker: str
    alice: Person
    bob: Person
    carol: Person
    victor: Person
    team_id: int
    experiment_id: int
    run_ids: list[int]
    dashboard_id: str
    share_token: str
    share_link_id: int
    alice_token_id: int
    invitation_id: int
    ids: dict[str, object] = field(default_factory=dict)


def spec(name: str, team_id: int | None = None) -> dict[str, object]:
    return {
        "name": name,
        "team_id": team_id,
        "training": TINY_TRAINING,
        "techniques": [{"name": "sparsetrain", "prune_rate": 0.5}],
        "accelerators": ["edge"],
    }


def join_team(client: TestClient, owner: Person, person: Person, team_id: int, role: str) -> None:
    """The owner invites the person, who accepts."""
    invited = client.post(
        f"/api/v1/teams/{team_id}/members",
        json={"email": person.email, "role": role},
        headers=owner.auth,
    )
    assert invited.status_code == 201, invited.text
    accepted = client.post(
        f"/api/v1/invitations/{invited.json()['id']}/accept", headers=person.auth
    )
    assert accepted.status_code == 200, accepted.text


@pytest.fixture
def world(client: TestClient, accounts_settings: Settings) -> World:
    marker = f"m{uuid.uuid4().hex[:10]}"
    alice = make_person(accounts_settings, "alice")
    bob = make_person(accounts_settings, "bob")
    carol = make_person(accounts_settings, "carol")
    victor = make_person(accounts_settings, "victor")

    team = client.post("/api/v1/teams", json={"name": f"team {marker}"}, headers=alice.auth)
    assert team.status_code == 201, team.text
    team_id = team.json()["id"]
    for person, role in ((carol, "member"), (victor, "viewer")):
        join_team(client, alice, person, team_id, role)

    experiment = client.post(
        "/api/v1/experiments", json=spec(f"experiment {marker}", team_id), headers=alice.auth
    )
    assert experiment.status_code == 201, experiment.text
    experiment_id = experiment.json()["id"]
    with session_scope(accounts_settings.effective_database_url) as db:
        runs = list(db.scalars(select(Run).where(Run.experiment_id == experiment_id)))
        for run in runs:  # finished, so they show on the Pareto front too
            db.execute(
                update(Run)
                .where(Run.id == run.id)
                .values(status="done", accuracy=0.9, speedup=1.5, energy_pj=1e6, total_cycles=1)
            )
        run_ids = sorted(run.id for run in runs)

    dashboard = client.post(
        "/api/v1/dashboards",
        json={"name": f"dashboard {marker}", "team_id": team_id, "config": {"run_ids": run_ids}},
        headers=alice.auth,
    )
    assert dashboard.status_code == 201, dashboard.text
    dashboard_id = dashboard.json()["id"]
    link = client.post(f"/api/v1/dashboards/{dashboard_id}/share-links", headers=alice.auth)
    assert link.status_code == 201, link.text
    search_id, accelerator_id = alice_search(accounts_settings, experiment_id, alice, marker)
    tokens = client.get("/api/v1/tokens", headers=alice.auth).json()
    invitation = client.post(
        f"/api/v1/teams/{team_id}/members",
        json={"email": f"newcomer-{marker}@example.org", "role": "viewer"},
        headers=alice.auth,
    )
    assert invitation.status_code == 201, invitation.text
    return World(
        marker=marker,
        alice=alice,
        bob=bob,
        carol=carol,
        victor=victor,
        team_id=team_id,
        experiment_id=experiment_id,
        run_ids=run_ids,
        dashboard_id=dashboard_id,
        share_token=link.json()["token"],
        share_link_id=link.json()["id"],
        alice_token_id=tokens[0]["id"],
        invitation_id=invitation.json()["id"],
        ids={"search_id": search_id, "design_index": 0, "accelerator_id": accelerator_id},
    )


def alice_search(
    settings: Settings, experiment_id: int, alice: Person, marker: str
) -> tuple[int, int]:
    """A finished design search of Alice's experiment, with design 0 on its front, and that
    design saved as her own accelerator (the ids of both)."""
    spec = DesignSearch(base="edge", mode="grid", parameters={"rows": {"values": [16]}})
    config = PRESETS["edge"].model_copy(update={"name": f"design {marker}"[:64]})
    points = {"index": [0], "figures": [[1.0, 2.0, 3.0]]}
    with session_scope(settings.effective_database_url) as db:
        search = DesignSearchRow(
            experiment_id=experiment_id,
            created_by=alice.id,
            spec=spec.model_dump(mode="json"),
            status="done",
            designs=1,
            result={
                "objectives": list(spec.objectives),
                "sample_size": spec.sample_size,
                "workloads": {
                    "sparsetrain": {
                        "evaluated": 1,
                        "feasible": 1,
                        "front": points,
                        "sample": points,
                    }
                },
            },
            design_fields={"index": [0], "fields": {"rows": [16]}},
            front_designs={"0": config.model_dump(mode="json")},
        )
        db.add(search)
        db.flush()
        saved = SavedAccelerator(
            owner_id=alice.id,
            name=f"accelerator {marker}",
            config=config.model_dump(mode="json"),
            search_id=search.id,
            design_index=0,
        )
        db.add(saved)
        db.flush()
        return search.id, saved.id


def role_of(settings: Settings, team_id: int, user_id: int) -> str | None:
    with session_scope(settings.effective_database_url) as db:
        return db.scalar(
            select(TeamMembership.role).where(
                TeamMembership.team_id == team_id, TeamMembership.user_id == user_id
            )
        )


# Started as `orrery serve` starts it: the app, not uvicorn, decides whom to believe about the
# client's address (backend/api/client_address.py).
UVICORN = [
    sys.executable,
    *("-m", "uvicorn", "backend.api.app:create_app", "--factory", "--no-proxy-headers"),
]


@contextmanager
def uvicorn_server(settings: Settings, **env: str) -> Iterator[str]:
    """A real API process on these settings' database and broker (for answers that stream,
    which the test client would only hand over whole); yields its base URL."""
    port = free_port()
    server_env = orrery_env(
        ORRERY_DATA_DIR=str(settings.data_dir),
        ORRERY_DATABASE_URL=settings.effective_database_url,
        ORRERY_BROKER_URL=settings.effective_broker_url,
        ORRERY_RESULT_BACKEND=settings.effective_result_backend,
        ORRERY_SECRET_KEY=settings.effective_secret_key(),
        ORRERY_RECONCILE_INTERVAL="0",
        **env,
    )
    server = subprocess.Popen(
        [*UVICORN, "--host", "127.0.0.1", "--port", str(port)],
        env=server_env,
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/api/v1/health", process=server)
        yield base
    finally:
        stop_process(server)
