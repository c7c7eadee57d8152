"""Epochs stored as they are measured, under the lease, and the progress the API derives from
them: epoch k of N, fraction and time left, on PostgreSQL with a real training."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.db.models import EpochMetric, Run, Training
from backend.db.session import session_scope
from backend.settings import Settings
from backend.training import Progress
from tests.pipeline.conftest import TINY_TRAINING
from worker.jobs import run_training_job

EPOCHS = 3
SPEC = {
    "name": "live epochs",
    "training": {**TINY_TRAINING, "epochs": EPOCHS},
    "techniques": [{"name": "baseline"}],
    "accelerators": ["edge"],
}
FIELDS = ("epoch", "train_loss", "train_accuracy", "test_loss", "test_accuracy", "wall_seconds")


def stored_epochs(url: str, training_id: int) -> list[dict[str, Any]]:
    with session_scope(url) as db:
        rows = db.scalars(
            select(EpochMetric)
            .where(EpochMetric.training_id == training_id)
            .order_by(EpochMetric.epoch)
        )
        return [{name: getattr(row, name) for name in FIELDS} for row in rows]


def test_each_epoch_is_stored_as_measured_once_and_as_the_results_store_it(
    api: TestClient, pg_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = pg_settings.effective_database_url
    experiment = api.post("/api/v1/experiments", json=SPEC).json()
    with session_scope(url) as db:
        training_id = db.scalar(select(Training.id))
        run_id = db.scalar(select(Run.id))
        # An earlier delivery died after storing five epochs of its own (the training was
        # taken back): the new delivery's epochs must replace them, never add to them.
        db.add_all(
            EpochMetric(training_id=training_id, epoch=n, train_loss=99.0, per_layer={})
            for n in range(1, 6)
        )
    monkeypatch.setattr("worker.jobs.PROGRESS_INTERVAL", 0.0)  # report every batch
    seen: dict[int, list[dict[str, Any]]] = {}
    answers: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}

    def on_progress(progress: Progress) -> None:
        if progress.batch != 1 or progress.epoch in seen:
            return
        seen[progress.epoch] = stored_epochs(url, training_id)
        run = api.get(f"/api/v1/runs/{run_id}").json()
        answers[progress.epoch] = (run, api.get(f"/api/v1/experiments/{experiment['id']}").json())

    assert run_training_job(url, training_id, "live", on_progress=on_progress) == "done"

    # At the first batch of epoch k, epochs 1..k-1 of this delivery are stored, and only they.
    assert sorted(seen) == list(range(1, EPOCHS + 1))
    for epoch, rows in seen.items():
        assert [row["epoch"] for row in rows] == list(range(1, epoch))
        assert all(row["train_loss"] != 99.0 and row["wall_seconds"] > 0 for row in rows)
    # The results store the same epochs as were stored live.
    final = stored_epochs(url, training_id)
    assert final == seen[EPOCHS] + [final[-1]] and len(final) == EPOCHS

    # The run's progress: epoch k of N, and the time left from the measured epochs' wall time.
    for epoch in range(2, EPOCHS + 1):
        run, experiment_now = answers[epoch]
        live = run["live"]
        assert (live["epoch"], live["epochs"]) == (epoch - 1, EPOCHS)
        batches_per_epoch = TINY_TRAINING["train_samples"] // TINY_TRAINING["batch_size"]
        fraction = ((epoch - 1) * batches_per_epoch + 1) / (EPOCHS * batches_per_epoch)
        assert live["fraction"] == pytest.approx(0.98 * fraction)
        walls = [row["wall_seconds"] for row in seen[epoch]]
        expected = sum(walls) / len(walls) * (EPOCHS - fraction * EPOCHS)
        assert live["seconds_left"] == pytest.approx(expected, rel=1e-9)
        progress = experiment_now["progress"]
        assert progress["running"] == 1
        assert progress["fraction"] == pytest.approx(0.98 * fraction)
        assert progress["seconds_left"] == pytest.approx(expected, rel=1e-9)
    # Before its first epoch is measured: epoch 1 of N, the time left not known yet.
    live = answers[1][0]["live"]
    assert (live["epoch"], live["epochs"], live["seconds_left"]) == (0, EPOCHS, None)
    done = api.get(f"/api/v1/runs/{run_id}").json()
    assert done["live"] is None and [e["epoch"] for e in done["epochs"]] == [1, 2, 3]
