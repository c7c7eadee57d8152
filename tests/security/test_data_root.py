"""A training's dataset_path must lie inside the server's data root: refused with 422 naming
the field at submission (and preview), and refused again by the worker before it opens
anything, with the same reason whether or not the path exists."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from backend.db.models import Run, Training
from backend.db.session import session_scope
from backend.settings import Settings, get_settings
from tests.security.conftest import World, spec
from worker.jobs import run_training_job


def with_path(path: str, **extra: object) -> dict:
    body = spec("data")
    body["training"] = {**body["training"], "dataset": "idx-dir", "dataset_path": path}  # type: ignore[dict-item]
    return {**body, **extra}


@pytest.mark.parametrize("route", ["/api/v1/experiments", "/api/v1/experiments/preview"])
def test_paths_outside_the_data_root_are_422(
    client: TestClient,
    world: World,
    accounts_settings: Settings,
    route: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = accounts_settings.effective_data_root
    outside = tmp_path_factory.mktemp("elsewhere")
    (root / "escape").symlink_to(outside)
    sibling = f"../{outside.name}"
    for path in ("/etc", str(outside), sibling, "escape", "escape/sub", "/etc/\x00x"):
        answer = client.post(route, json=with_path(path), headers=world.alice.auth)
        assert answer.status_code == 422, (path, answer.text)
        detail = answer.json()["detail"][0]
        assert detail["loc"] == ["body", "training", "dataset_path"], path
        assert str(root) not in answer.text  # the server's layout stays private
    (root / "mnist").mkdir()
    for path in (str(root / "mnist"), "mnist", "not-there-yet"):
        answer = client.post(route, json=with_path(path), headers=world.alice.auth)
        assert answer.status_code in (200, 201), (path, answer.text)


def test_a_swept_path_is_checked_too(
    client: TestClient, world: World, accounts_settings: Settings
) -> None:
    sweep = {"parameters": {"training.dataset_path": {"values": ["inside", "/etc"]}}}
    answer = client.post(
        "/api/v1/experiments", json=with_path("inside", sweep=sweep), headers=world.alice.auth
    )
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == [
        "body", "sweep", "parameters", "training.dataset_path",
    ]  # fmt: skip


@pytest.fixture
def worker_data_root(
    accounts_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """The worker (run here, in-process) reads its data root from its environment."""
    monkeypatch.setenv("ORRERY_DATA_DIR", str(accounts_settings.data_dir))
    get_settings.cache_clear()
    yield get_settings().effective_data_root
    get_settings.cache_clear()


def test_the_worker_refuses_a_stored_path_outside_its_root_without_opening_it(
    client: TestClient,
    world: World,
    accounts_settings: Settings,
    worker_data_root: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Rows written before the check, or by an API with another root, are refused again."""
    assert worker_data_root == accounts_settings.effective_data_root
    url = accounts_settings.effective_database_url
    errors = []
    for path in ("/etc", str(tmp_path_factory.mktemp("other") / "does-not-exist")):
        made = client.post(
            "/api/v1/experiments", json=with_path("inside"), headers=world.alice.auth
        )
        experiment_id = made.json()["id"]
        with session_scope(url) as db:
            trainings = list(
                db.scalars(select(Training).where(Training.experiment_id == experiment_id))
            )
            for training in trainings:
                config = {**training.training_config, "dataset_path": path}
                db.execute(
                    update(Training)
                    .where(Training.id == training.id)
                    .values(training_config=config)
                )
        for training in trainings:
            assert run_training_job(url, training.id, task_id="t") == "failed"
        with session_scope(url) as db:
            runs = db.scalars(select(Run).where(Run.experiment_id == experiment_id))
            errors.append({run.error for run in runs})
    assert errors[0] == errors[1], "the error tells whether the path exists"
    (reason,) = errors[0]
    assert "data root" in reason
