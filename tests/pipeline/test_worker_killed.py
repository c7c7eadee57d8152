"""A worker's pool process SIGKILLed mid-training: Celery redelivers the task at once, but the
training's lease is still live, so that delivery leaves it alone; once the lease expires the
API's reconciler takes the training back and a new delivery stores one result set."""

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from backend.api.app import create_app
from backend.db.models import EpochMetric, LayerResult, Run, Training
from backend.db.session import session_scope
from backend.delivery.queue import TaskName, make_celery
from backend.settings import Settings
from tests.reliability.chaos import Worker, child_pids, poll

SPEC = {
    "name": "kill me",
    # 2 x 600 batches of LeNet-5: seconds on a quiet machine, so a progress write (one a second)
    # shows each training in its first half, where the kill must land (see the wait below).
    "training": {
        "model": "lenet5",
        "dataset": "mnist",
        "epochs": 2,
        "batch_size": 32,
        "train_samples": 19200,
        "test_samples": 800,
    },
    "techniques": [{"name": "sparsetrain"}],
    "accelerators": ["edge", "eyeriss-like"],
}


LEASE_SECONDS = 3


@pytest.fixture
def api(pg_settings: Settings) -> Iterator[TestClient]:
    """The API with its reconciler taking back expired leases every half second."""
    settings = pg_settings.model_copy(
        update={"lease_seconds": LEASE_SECONDS, "reconcile_interval": 0.5}
    )
    with TestClient(create_app(settings)) as client:
        yield client


def test_sigkilled_worker_process_is_redelivered_once(
    api: TestClient, pg_settings: Settings, redis_db_url: str, tmp_path: Path
) -> None:
    url = pg_settings.effective_database_url
    # Logging to a file: a pipe nobody reads while waiting would stall the worker once full.
    started = Worker.start(
        pg_settings.model_copy(update={"lease_seconds": LEASE_SECONDS, "data_dir": tmp_path}),
        "worker",
    )
    worker = started.process
    try:
        # The worker must be consuming before the kill can land mid-training.
        ready = make_celery(pg_settings).send_task(TaskName.PING).get(timeout=120)
        assert ready["pid"] != worker.pid
        response = api.post("/api/v1/experiments", json=SPEC)
        assert response.status_code == 201, response.text

        def first_training_under_way() -> Training | None:
            """A training seen in its first half (a training too quick to be seen there fails
            the wait rather than letting the kill land in its simulations)."""
            with session_scope(url) as db:
                return db.scalar(
                    select(Training).where(
                        Training.status == "running", Training.progress.between(0.05, 0.5)
                    )
                )

        try:
            victim = poll(first_training_under_way, 240, "a training to make progress")
        except AssertionError as timeout:
            with session_scope(url) as db:
                states = [(t.status, t.progress, t.attempts) for t in db.scalars(select(Training))]
            worker_log = started.stop()[-4000:]
            raise AssertionError(f"trainings {states}; worker said:\n{worker_log}") from timeout
        pool = poll(lambda: child_pids(worker.pid), 10, "the worker's pool process")
        for pid in pool:
            os.kill(pid, signal.SIGKILL)

        def all_done() -> bool:
            with session_scope(url) as db:
                statuses = set(db.scalars(select(Run.status)))
            return statuses == {"done"}

        poll(all_done, 600, "every run to finish after the kill")
    finally:
        log = started.stop()

    assert "WorkerLostError" in log or "SIGKILL" in log or "signal 9" in log, log[-2000:]
    with session_scope(url) as db:
        training = db.get(Training, victim.id)
        assert training.attempts == 2  # the killed delivery and the one after its lease
        assert training.status == "done"
        epochs = db.scalar(
            select(func.count())
            .select_from(EpochMetric)
            .where(EpochMetric.training_id == victim.id)
        )
        assert epochs == SPEC["training"]["epochs"]
        ops = len(training.workload["ops"])
        for run in db.scalars(select(Run).where(Run.training_id == victim.id)):
            layers = db.scalar(
                select(func.count()).select_from(LayerResult).where(LayerResult.run_id == run.id)
            )
            assert layers == ops
            assert run.total_cycles > 0 and run.accuracy is not None
