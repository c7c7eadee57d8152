"""A retry racing the deletion of its run's experiment, on real PostgreSQL: never a 5xx.

Either the retry comes first (200), and the deletion is refused because the run is queued again
(409), or the deletion comes first (204), and the retry answers 404 (the run is gone) or 409.
Never both: a deleted experiment keeps no re-queued run, a retried run is never deleted under it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, select, update

from backend.api.routes import runs as runs_routes
from backend.db.models import Experiment, Run, Training
from backend.db.session import session_scope
from backend.settings import Settings
from tests.security.conftest import Person, make_person, spec

ROUNDS = 16


def failed_experiment(client: TestClient, settings: Settings, person: Person) -> tuple[int, int]:
    """An experiment of the person's whose runs and trainings all failed; (its id, a run id)."""
    made = client.post("/api/v1/experiments", json=spec("racing"), headers=person.auth)
    assert made.status_code == 201, made.text
    experiment_id = made.json()["id"]
    with session_scope(settings.effective_database_url) as db:
        db.execute(update(Run).where(Run.experiment_id == experiment_id).values(status="failed"))
        db.execute(
            update(Training).where(Training.experiment_id == experiment_id).values(status="failed")
        )
        run_id = db.scalar(
            select(Run.id).where(Run.experiment_id == experiment_id).order_by(Run.id)
        )
    assert run_id is not None
    return experiment_id, run_id


def delete_rows(settings: Settings, experiment_id: int) -> None:
    """The experiment gone, as a deletion committed by another request leaves it."""
    with session_scope(settings.effective_database_url) as db:
        db.execute(delete(Experiment).where(Experiment.id == experiment_id))


def retry_and_delete_at_once(
    client: TestClient, person: Person, experiment_id: int, run_id: int
) -> tuple[int, int]:
    """The retry's status and the deletion's, sent at the same moment from two threads."""
    start = threading.Barrier(2)

    def retry() -> int:
        start.wait()
        return client.post(f"/api/v1/runs/{run_id}/retry", headers=person.auth).status_code

    def remove() -> int:
        start.wait()
        path = f"/api/v1/experiments/{experiment_id}"
        return client.delete(path, headers=person.auth).status_code

    with ThreadPoolExecutor(2) as pool:
        retried, deleted = pool.submit(retry), pool.submit(remove)
        return retried.result(), deleted.result()


def test_retry_and_delete_at_once_never_answer_5xx(
    client: TestClient, accounts_settings: Settings
) -> None:
    alice = make_person(accounts_settings, "alice")
    outcomes: Counter[tuple[int, int]] = Counter()
    for _ in range(ROUNDS):
        experiment_id, run_id = failed_experiment(client, accounts_settings, alice)
        outcome = retry_and_delete_at_once(client, alice, experiment_id, run_id)
        outcomes[outcome] += 1
        assert outcome in {(200, 409), (404, 204), (409, 204)}, outcomes
        with session_scope(accounts_settings.effective_database_url) as db:
            left = db.scalar(select(Run.status).where(Run.id == run_id))
        assert left == ("queued" if outcome[0] == 200 else None)


@pytest.mark.parametrize("when", ["after", "before"])
def test_a_run_deleted_between_the_retrys_steps_is_404(
    client: TestClient,
    accounts_settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    when: str,
) -> None:
    """The race made deterministic: the experiment's rows vanish just before the retry writes
    (it finds nothing to re-queue) or just after it committed (it reads the run back)."""
    alice = make_person(accounts_settings, "alice")
    experiment_id, run_id = failed_experiment(client, accounts_settings, alice)
    original: Callable[..., bool] = runs_routes.retry_run

    def racing_retry(*args: object, **kwargs: object) -> bool:
        if when == "before":
            delete_rows(accounts_settings, experiment_id)
        sent = original(*args, **kwargs)
        if when == "after":
            delete_rows(accounts_settings, experiment_id)
        return sent

    monkeypatch.setattr(runs_routes, "retry_run", racing_retry)
    answer = client.post(f"/api/v1/runs/{run_id}/retry", headers=alice.auth)
    assert answer.status_code == 404, answer.text
    assert f"run {run_id}" in answer.json()["detail"]
    assert client.get(f"/api/v1/runs/{run_id}", headers=alice.auth).status_code == 404
