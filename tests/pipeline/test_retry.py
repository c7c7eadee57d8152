"""Retrying a failed or cancelled run on PostgreSQL: a new attempt with the ended one kept, only
that run re-run, refused for runs that are not failed or cancelled, and two concurrent retries
take effect once."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from backend.db.models import Run, RunAttempt, Training
from backend.db.session import session_scope
from backend.experiments.retry import RetryRefused, retry_run
from backend.settings import Settings
from backend.training.idx_format import write_idx
from tests.conftest import start_worker, stop_process
from tests.pipeline.conftest import TINY_TRAINING, worker_env
from tests.pipeline.test_end_to_end import wait_for_runs
from tests.pipeline.test_leases import ONE_TRAINING, submit
from worker.jobs import run_training_job

MISSING_DATA = {
    **ONE_TRAINING,
    "name": "retried",
    "training": {**TINY_TRAINING, "dataset": "idx-dir", "dataset_path": "retry-data"},
}


def write_idx_folder(folder: Path) -> None:
    """An MNIST-like folder of random 8x8 images: enough for the tiny training."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, count in (("train", 300), ("t10k", 150)):
        images = rng.integers(0, 256, (count, 8, 8), dtype=np.uint8)
        write_idx(folder / f"{prefix}-images-idx3-ubyte", images)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte", np.arange(count, dtype=np.uint8) % 10)


def run_ids(api: TestClient, experiment_id: int) -> list[int]:
    runs = api.get("/api/v1/runs", params={"experiment_id": experiment_id, "sort": "id"})
    return [run["id"] for run in runs.json()["items"]]


def test_a_failed_run_retried_on_a_real_worker_completes_with_its_first_attempt_kept(
    api: TestClient, pg_settings: Settings, redis_db_url: str, tmp_path: Path
) -> None:
    worker = start_worker(worker_env(pg_settings, redis_db_url, tmp_path), cwd=tmp_path)
    try:
        experiment = api.post("/api/v1/experiments", json=MISSING_DATA).json()
        first, sibling = (r for r in wait_for_runs(api, experiment["id"]))
        assert (first["status"], sibling["status"]) == ("failed", "failed")
        assert "idx-dir" in first["error"]

        write_idx_folder(tmp_path / "retry-data")  # the cause, put right
        retried = api.post(f"/api/v1/runs/{first['id']}/retry")
        assert retried.status_code == 200, retried.text
        # Its next attempt, sent: the worker may have claimed it before the answer read it back.
        assert retried.json()["attempt"] == 2
        assert retried.json()["status"] in ("queued", "running")
        again = api.post(f"/api/v1/runs/{first['id']}/retry")
        assert again.status_code == 409 and "only a failed or cancelled run" in again.text
        runs = {r["id"]: r for r in wait_for_runs(api, experiment["id"])}

        # Only the run asked for re-ran; its sibling on the same training is still failed, and
        # its own retry simulates the stored training on its accelerator.
        assert runs[first["id"]]["status"] == "done", stop_process(worker)[-3000:]
        assert runs[sibling["id"]]["status"] == "failed"
        assert api.post(f"/api/v1/runs/{sibling['id']}/retry").status_code == 200
        runs = {r["id"]: r for r in wait_for_runs(api, experiment["id"])}
    finally:
        log = stop_process(worker)
    assert [r["status"] for r in runs.values()] == ["done", "done"], log[-3000:]
    for run in runs.values():
        assert run["attempt"] == 2 and run["total_cycles"] > 0 and run["speedup"] == 1.0
    detail = api.get(f"/api/v1/runs/{first['id']}").json()
    [ended] = detail["attempts"]
    assert (ended["attempt"], ended["status"]) == (1, "failed")
    assert "idx-dir" in ended["error"] and ended["finished_at"] and ended["worker"]
    assert detail["error"] is None and [e["epoch"] for e in detail["epochs"]] == [1]
    final = api.get(f"/api/v1/experiments/{experiment['id']}").json()
    assert final["status"] == "done"
    with session_scope(pg_settings.effective_database_url) as db:
        training = db.scalar(select(Training).where(Training.experiment_id == experiment["id"]))
        # First delivery, the retry's fencing step, the second delivery.
        assert (training.attempts, training.attempts_at_retry) == (3, 2)
    export = api.get("/api/v1/runs/export", params={"experiment_id": experiment["id"]})
    header, *rows = export.text.splitlines()
    column = header.split(",").index("attempts")
    assert [row.split(",")[column] for row in rows] == ["2", "2"]


def test_retry_is_refused_for_open_and_finished_runs_and_unknown_ones(
    api: TestClient, pg_settings: Settings
) -> None:
    url = pg_settings.effective_database_url
    experiment_id, [training_id] = submit(api)
    first, queued = run_ids(api, experiment_id)
    refused = api.post(f"/api/v1/runs/{queued}/retry")
    assert refused.status_code == 409
    assert refused.json()["detail"] == (
        f"run {queued} is queued (attempt 1): only a failed or cancelled run can be retried"
    )
    assert api.post("/api/v1/runs/999999/retry").status_code == 404

    # Cancelled while queued, then retried: queued again and sent, its training too.
    assert api.post(f"/api/v1/runs/{first}/cancel").json()["status"] == "cancelled"
    assert api.post(f"/api/v1/runs/{queued}/cancel").json()["status"] == "cancelled"
    with session_scope(url) as db:
        old_task = db.get(Training, training_id).task_id
    for run_id in (first, queued):
        answer = api.post(f"/api/v1/runs/{run_id}/retry")
        assert answer.status_code == 200 and answer.json()["attempt"] == 2
    with session_scope(url) as db:
        training = db.get(Training, training_id)
        assert training.status == "queued" and not training.cancel_requested
        assert training.task_id != old_task
        task_id = training.task_id
    assert api.get(f"/api/v1/experiments/{experiment_id}").json()["status"] == "queued"
    assert run_training_job(url, training_id, task_id=task_id) == "done"
    finished = api.post(f"/api/v1/runs/{first}/retry")
    assert finished.status_code == 409 and f"run {first} is done (attempt 2)" in finished.text
    history = api.get(f"/api/v1/runs/{first}").json()["attempts"]
    assert [(a["attempt"], a["status"]) for a in history] == [(1, "cancelled")]


def test_two_concurrent_retries_take_effect_once(api: TestClient, pg_settings: Settings) -> None:
    url = pg_settings.effective_database_url
    experiment_id, [training_id] = submit(api)
    run_id = run_ids(api, experiment_id)[0]
    api.post(f"/api/v1/experiments/{experiment_id}/cancel")
    celery = api.app.state.celery
    both_read = threading.Barrier(2)
    outcomes: list[str] = []

    def retry() -> None:
        with session_scope(url) as db:
            run = db.get(Run, run_id)
            assert run is not None and run.status == "cancelled"
            both_read.wait()
            try:
                retry_run(db, celery, run, retried_by=None)
                outcomes.append("retried")
            except RetryRefused as exc:
                outcomes.append(str(exc))

    threads = [threading.Thread(target=retry) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == [
        "retried",
        f"run {run_id} was retried meanwhile: its next attempt is under way",
    ]
    with session_scope(url) as db:
        assert db.get(Run, run_id).attempt == 2
        attempts = db.scalar(select(func.count()).select_from(RunAttempt))
        training = db.get(Training, training_id)
        assert attempts == 1 and (training.status, training.attempts) == ("queued", 1)
