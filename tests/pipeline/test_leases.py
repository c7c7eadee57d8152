"""Leases and fencing on PostgreSQL, in one process: a lease expires by the clock, the
reconciler takes the training back, a superseded attempt can write nothing, a training out of
attempts fails with the reason, cancel changes state at once, and no reader ever sees a run
`done` without its metrics."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text

from backend.api.security import local_user
from backend.cli.output import console
from backend.cli.tables import print_runs
from backend.db.models import EpochMetric, LayerResult, Run, Training
from backend.db.session import session_scope
from backend.delivery.claims import TrainingLease, claim_training
from backend.delivery.leases import LeaseTerms
from backend.delivery.reconcile import reconcile_once
from backend.experiments.quota import active_runs
from backend.settings import Settings
from backend.specs.techniques import parse_techniques
from backend.specs.training import TrainingConfig
from backend.training import run_training
from tests.pipeline.conftest import TINY_TRAINING
from worker.jobs import run_training_job
from worker.storage import store_results

ONE_TRAINING = {
    "name": "leased",
    "training": TINY_TRAINING,
    "techniques": [{"name": "baseline"}],
    "accelerators": ["edge", "eyeriss-like"],
}
SHORT = LeaseTerms(lease_seconds=0.5, max_attempts=3)
# Whether a lease is live is judged by the claimer's terms: judged with a long lease, the check
# that a held lease refuses other deliveries does not depend on how fast a loaded machine runs it.
LONG = LeaseTerms(lease_seconds=60, max_attempts=3)


def submit(api: TestClient, spec: dict = ONE_TRAINING) -> tuple[int, list[int]]:
    response = api.post("/api/v1/experiments", json=spec)
    assert response.status_code == 201, response.text
    experiment_id = response.json()["id"]
    url = api.app.state.settings.effective_database_url
    with session_scope(url) as db:
        ids = db.scalars(
            select(Training.id).where(Training.experiment_id == experiment_id).order_by(Training.id)
        )
        return experiment_id, list(ids)


def short_lease(settings: Settings, max_attempts: int = 3) -> Settings:
    return settings.model_copy(
        update={"lease_seconds": SHORT.lease_seconds, "max_attempts": max_attempts}
    )


def claim(url: str, training_id: int, task_id: str, terms: LeaseTerms = SHORT) -> int | None:
    with session_scope(url) as db:
        return claim_training(db, training_id, task_id, terms)


def result_rows(url: str) -> tuple[int, int]:
    with session_scope(url) as db:
        return (
            db.scalar(select(func.count()).select_from(EpochMetric)) or 0,
            db.scalar(select(func.count()).select_from(LayerResult)) or 0,
        )


def test_an_expired_lease_is_taken_back_and_the_old_attempt_cannot_commit(
    api: TestClient, pg_settings: Settings
) -> None:
    url = pg_settings.effective_database_url
    settings = short_lease(pg_settings)
    celery = api.app.state.celery
    _, [training_id] = submit(api)
    assert claim(url, training_id, "first") == 1
    # Any other delivery while the first holds a live lease gets nothing, even the same task
    # redelivered; once the lease expired, one does.
    assert claim(url, training_id, "second", LONG) is None
    assert claim(url, training_id, "first", LONG) is None
    time.sleep(SHORT.lease_seconds + 0.3)
    assert claim(url, training_id, "first") == 2
    stale = TrainingLease(url, training_id, attempt=1, interval=1)
    stale.renew()
    assert stale.lost.is_set()

    time.sleep(SHORT.lease_seconds + 0.3)  # attempt 2 stops beating: stopped, killed, cut off
    report = reconcile_once(settings, celery, grace_seconds=3600)
    assert report.expired == [training_id] and report.failed == []
    with session_scope(url) as db:
        training = db.get(Training, training_id)
        assert (training.status, training.attempts) == ("queued", 2)
        assert training.task_id not in ("first", "second")
        new_task = training.task_id
        assert set(db.scalars(select(Run.status).where(Run.training_id == training_id))) == {
            "queued"
        }

    assert run_training_job(url, training_id, task_id=new_task, terms=SHORT) == "done"
    once = result_rows(url)
    assert once[0] == 1 and once[1] > 0

    # The stopped attempt wakes up with a finished training of its own: fenced off.
    result = run_training(TrainingConfig(**TINY_TRAINING), parse_techniques([]))
    with session_scope(url) as db:
        assert store_results(db, training_id, 2, result) is False
    assert result_rows(url) == once
    with session_scope(url) as db:
        training = db.get(Training, training_id)
        assert (training.status, training.attempts) == ("done", 3)
        for run in db.scalars(select(Run).where(Run.training_id == training_id)):
            assert run.status == "done" and run.total_cycles and run.accuracy is not None


def test_a_training_out_of_attempts_fails_with_the_reason(
    api: TestClient, pg_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = pg_settings.effective_database_url
    settings = short_lease(pg_settings, max_attempts=2)
    celery = api.app.state.celery
    experiment_id, [training_id] = submit(api)
    for attempt in (1, 2):
        with session_scope(url) as db:
            task_id = db.get(Training, training_id).task_id
        assert claim(url, training_id, task_id, LeaseTerms(0.5, 2)) == attempt
        time.sleep(0.8)
        report = reconcile_once(settings, celery, grace_seconds=3600)
    assert report.failed == [training_id] and report.expired == []

    with session_scope(url) as db:
        training = db.get(Training, training_id)
        assert training.status == "failed"
        assert "gave up after 2 attempts" in training.error
        runs = list(db.scalars(select(Run).where(Run.experiment_id == experiment_id)))
        assert {r.status for r in runs} == {"failed"}
        assert all(r.error == training.error for r in runs)
        assert active_runs(db, local_user(db)) == 0  # no longer held against the quota
    assert api.get(f"/api/v1/experiments/{experiment_id}").json()["status"] == "failed"

    failed = api.get("/api/v1/runs", params={"status": "failed"}).json()["items"]
    monkeypatch.setattr(console, "width", 400)  # what `orrery runs --status failed` prints
    with console.capture() as captured:
        print_runs(failed)
    table = captured.get()
    assert "reason" in table.splitlines()[1]
    assert "gave up after 2" in table


def test_cancel_ends_stranded_trainings_and_single_runs_at_once(
    api: TestClient, pg_settings: Settings
) -> None:
    url = pg_settings.effective_database_url
    spec = {**ONE_TRAINING, "techniques": [{"name": "sparsetrain", "prune_rate": 0.8}]}
    experiment_id, [baseline_id, sparse_id] = submit(api, spec)
    with session_scope(url) as db:
        sparse_runs = list(db.scalars(select(Run.id).where(Run.training_id == sparse_id)))
        baseline_runs = list(db.scalars(select(Run.id).where(Run.training_id == baseline_id)))

    # One run of a training shared by two: the training goes on for the other.
    first = api.post(f"/api/v1/runs/{sparse_runs[0]}/cancel")
    assert first.status_code == 200 and first.json()["status"] == "cancelled"
    with session_scope(url) as db:
        assert db.get(Training, sparse_id).status == "queued"
    # Its last open run: the training is cancelled and never trains.
    assert api.post(f"/api/v1/runs/{sparse_runs[1]}/cancel").json()["status"] == "cancelled"
    assert run_training_job(url, sparse_id, task_id="late") == "cancelled"

    # A training stranded mid-way (claimed, then its worker vanished): cancel ends it now.
    assert claim(url, baseline_id, "vanished", LeaseTerms()) == 1
    answer = api.post(f"/api/v1/experiments/{experiment_id}/cancel")
    assert answer.status_code == 200 and answer.json()["status"] == "cancelled"
    with session_scope(url) as db:
        statuses = set(db.scalars(select(Run.status).where(Run.experiment_id == experiment_id)))
        assert statuses == {"cancelled"}
        assert db.get(Training, baseline_id).status == "cancelled"
    result = run_training(TrainingConfig(**TINY_TRAINING), parse_techniques([]))
    with session_scope(url) as db:
        assert store_results(db, baseline_id, 1, result) is False
    assert result_rows(url) == (0, 0)
    assert api.post(f"/api/v1/runs/{baseline_runs[0]}/cancel").status_code == 200
    assert api.post("/api/v1/runs/999999/cancel").status_code == 404


def test_no_reader_sees_a_run_done_without_its_metrics(
    api: TestClient, pg_settings: Settings
) -> None:
    url = pg_settings.effective_database_url
    spec = {**ONE_TRAINING, "accelerators": ["edge", "eyeriss-like", "tpu-like"]}
    experiment_id, [training_id] = submit(api, spec)
    seen: list[tuple[int, int]] = []  # (done runs, done runs lacking metrics or layers)
    finished = threading.Event()

    def read() -> None:
        with session_scope(url) as db:
            while not finished.is_set():
                row = db.execute(
                    text(
                        "SELECT count(*), count(*) FILTER (WHERE accuracy IS NULL "
                        "OR total_cycles IS NULL OR energy_pj IS NULL OR NOT EXISTS "
                        "(SELECT 1 FROM layer_results l WHERE l.run_id = runs.id)) "
                        "FROM runs WHERE status = 'done' AND experiment_id = :e"
                    ),
                    {"e": experiment_id},
                ).one()
                db.commit()  # a fresh snapshot for every read
                seen.append((row[0], row[1]))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert run_training_job(url, training_id, task_id="t") == "done"
    finally:
        finished.set()
        reader.join()
    assert any(done == 0 for done, _ in seen)
    assert all(lacking == 0 for _, lacking in seen), seen
    with session_scope(url) as db:
        assert set(db.scalars(select(Run.status).where(Run.training_id == training_id))) == {"done"}
