"""A multi-user server on real PostgreSQL: two people, a team, an experiment with finished runs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from backend.api.app import create_app
from backend.auth.tokens import create_token
from backend.auth.users import create_user
from backend.db.models import Run, Team, TeamMembership
from backend.db.session import session_scope
from backend.settings import Settings
from tests.conftest import service_settings
from tests.pipeline.conftest import TINY_TRAINING

SPEC = {
    "name": "dashboard sweep",
    "training": TINY_TRAINING,
    "techniques": [{"name": "mercury"}],
    "accelerators": ["edge"],
    "sweep": {"parameters": {"mercury.signature_bits": {"values": [8, 16, 24]}}},
}


@dataclass
class Person:
    id: int
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass
class World:
    owner: Person
    stranger: Person
    teammate: Person
    team_id: int
    run_ids: list[int]
    baseline_id: int


@pytest.fixture
def settings(postgres_url: str, redis_db_url: str, tmp_path: Path) -> Settings:
    return service_settings(
        postgres_url, redis_db_url, tmp_path, single_user=False, secret_key="dashboard-test-key"
    )


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), base_url="https://testserver") as test_client:
        yield test_client


def person(settings: Settings, name: str) -> Person:
    with session_scope(settings.effective_database_url) as db:
        email = f"{name}-{uuid.uuid4().hex[:6]}@example.org"
        user = create_user(db, email, "a long enough password", name)
        _, secret = create_token(db, user, "tests")
        return Person(user.id, secret)


def finish_runs(settings: Settings, experiment_id: int) -> tuple[list[int], int]:
    """Give the runs distinct known metrics and a per-operand energy summary, as a worker would."""
    with session_scope(settings.effective_database_url) as db:
        runs = list(
            db.scalars(select(Run).where(Run.experiment_id == experiment_id).order_by(Run.id))
        )
        baseline = next(r for r in runs if r.is_baseline)
        for run in runs:
            bits = run.params.get("mercury.signature_bits")
            cycles = 1_000_000 if bits is None else 400_000 + 20_000 * bits
            db.execute(
                update(Run)
                .where(Run.id == run.id)
                .values(
                    status="done",
                    progress=1.0,
                    accuracy=0.95 if bits is None else 0.95 - 0.4 / bits,
                    total_cycles=cycles,
                    seconds=cycles / 200e6,  # on edge's 200 MHz clock
                    speedup=1_000_000 / cycles,
                    energy_pj=5e6,
                    macs_algorithmic=10_000,
                    macs_actual=10_000 if bits is None else 6_000,
                    macs_skipped=0 if bits is None else 4_000,
                    dram_bytes=50_000,
                    summary={
                        "energy_by_level": {"mac": 1e6, "register": 1e6, "sram": 1e6, "dram": 2e6},
                        "energy_by_operand": {"ifmap": 1e6, "filter": 1e6, "ofmap": 1e6},
                        "seconds": cycles / 200e6,
                    },
                )
            )
        return [r.id for r in runs], baseline.id


@pytest.fixture
def world(client: TestClient, settings: Settings) -> World:
    owner, stranger, teammate = (person(settings, n) for n in ("olga", "sam", "tess"))
    with session_scope(settings.effective_database_url) as db:
        team = Team(name=f"team-{uuid.uuid4().hex[:6]}")
        db.add(team)
        db.flush()
        db.add(TeamMembership(team_id=team.id, user_id=owner.id, role="owner"))
        db.add(TeamMembership(team_id=team.id, user_id=teammate.id, role="viewer"))
        team_id = team.id
    response = client.post("/api/v1/experiments", json=SPEC, headers=owner.auth)
    assert response.status_code == 201, response.text
    run_ids, baseline_id = finish_runs(settings, response.json()["id"])
    return World(owner, stranger, teammate, team_id, run_ids, baseline_id)
