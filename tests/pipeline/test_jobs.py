"""The job runner on PostgreSQL: real training, stored once, however often it is delivered."""

from functools import partial

import pytest
import torch
from fastapi.testclient import TestClient
from sqlalchemy import delete, func, select, update

from backend.db.models import EpochMetric, LayerResult, Run, Training
from backend.db.session import session_scope
from backend.delivery.queue import make_celery
from backend.delivery.reconcile import reconcile_once
from backend.settings import Settings
from tests.pipeline.conftest import TINY_TRAINING
from worker.jobs import run_training_job
from worker.storage import run_area

SPEC = {
    "name": "jobs",
    "training": TINY_TRAINING,
    "techniques": [{"name": "sparsetrain", "prune_rate": 0.9}],
    "accelerators": ["edge", "eyeriss-like"],
}


def rows(url: str, model: type, **where: object) -> int:
    with session_scope(url) as db:
        query = select(func.count()).select_from(model)
        for name, value in where.items():
            query = query.where(getattr(model, name) == value)
        return db.scalar(query) or 0


def training_ids(url: str) -> list[int]:
    with session_scope(url) as db:
        return list(db.scalars(select(Training.id).order_by(Training.id)))


def test_job_trains_stores_and_simulates_each_run(api: TestClient, pg_settings: Settings) -> None:
    url = pg_settings.effective_database_url
    api.post("/api/v1/experiments", json=SPEC)
    for training_id in training_ids(url):
        assert run_training_job(url, training_id, task_id="t1") == "done"
    with session_scope(url) as db:
        runs = list(db.scalars(select(Run).order_by(Run.id)))
        assert [r.status for r in runs] == ["done"] * 4
        for run in runs:
            assert run.accuracy is not None and 0 <= run.accuracy <= 1
            assert run.total_cycles == run.compute_cycles + run.stall_cycles or run.total_cycles > 0
            assert run.macs_actual + run.macs_skipped == run.macs_algorithmic
            assert run.speedup is not None and run.energy_ratio is not None
            assert (run.macs_skipped > 0) == (run.technique == "sparsetrain")
            # Time: the simulated cycles over the accelerator's clock, per training and per step.
            clock_hz = run.accelerator_config["clock_mhz"] * 1e6
            assert run.seconds == pytest.approx(run.total_cycles / clock_hz, rel=1e-12)
            iterations = db.get(Training, run.training_id).workload["iterations"]
            assert run.seconds_per_step == pytest.approx(run.seconds / iterations, rel=1e-12)
            # Area: the area model's, for the run's accelerator with its extensions.
            assert run.area_mm2 == pytest.approx(
                run_area(run.accelerator_config, run.technique_params).area_mm2, rel=1e-12
            )
            assert run.summary["area_um2"]["zero_skipping"] > 0 or run.technique != "sparsetrain"
        assert {r.speedup for r in runs if r.is_baseline} == {1.0}
        # A baseline runs on the plain array: a technique's extension adds to its area.
        for run in runs:
            if not run.is_baseline:
                baseline = db.get(Run, run.baseline_run_id)
                assert run.area_mm2 > baseline.area_mm2
    assert rows(url, EpochMetric) == 2  # one epoch per training
    per_run = rows(url, LayerResult, run_id=runs[0].id)
    assert per_run > 0
    assert rows(url, LayerResult) == sum(rows(url, LayerResult, run_id=r.id) for r in runs)


def test_redelivery_never_duplicates_results(api: TestClient, pg_settings: Settings) -> None:
    url = pg_settings.effective_database_url
    api.post("/api/v1/experiments", json=SPEC)
    ids = training_ids(url)
    for training_id in ids:
        run_training_job(url, training_id, task_id="first")
    layers, epochs = rows(url, LayerResult), rows(url, EpochMetric)

    # Delivered again after it finished: nothing changes.
    for training_id in ids:
        assert run_training_job(url, training_id, task_id="first") == "done"
    assert (rows(url, LayerResult), rows(url, EpochMetric)) == (layers, epochs)

    # A worker died after storing the training but before simulating one run.
    with session_scope(url) as db:
        victim = db.scalar(select(Run).where(Run.is_baseline.is_(False)).order_by(Run.id))
        db.execute(delete(LayerResult).where(LayerResult.run_id == victim.id))
        db.execute(
            update(Run).where(Run.id == victim.id).values(status="running", total_cycles=None)
        )
    run_training_job(url, victim.training_id, task_id="redelivered")
    assert (rows(url, LayerResult), rows(url, EpochMetric)) == (layers, epochs)
    with session_scope(url) as db:
        assert db.get(Run, victim.id).status == "done"
        assert db.get(Run, victim.id).total_cycles is not None


def test_missing_data_fails_the_runs_with_the_reason(
    api: TestClient, pg_settings: Settings
) -> None:
    url = pg_settings.effective_database_url
    spec = {
        **SPEC,
        "training": {**TINY_TRAINING, "dataset": "idx-dir", "dataset_path": "no-such-dir"},
    }
    api.post("/api/v1/experiments", json=spec)
    statuses = {run_training_job(url, t, task_id="x") for t in training_ids(url)}
    assert statuses == {"failed"}
    with session_scope(url) as db:
        for run in db.scalars(select(Run)):
            assert run.status == "failed"
            assert "idx-dir" in run.error
    experiment = api.get("/api/v1/experiments").json()["items"][0]
    assert experiment["status"] == "failed"


def test_cancelled_before_start_never_trains(api: TestClient, pg_settings: Settings) -> None:
    url = pg_settings.effective_database_url
    experiment = api.post("/api/v1/experiments", json=SPEC).json()
    api.post(f"/api/v1/experiments/{experiment['id']}/cancel")
    assert {run_training_job(url, t, task_id="x") for t in training_ids(url)} == {"cancelled"}
    assert rows(url, EpochMetric) == 0
    assert rows(url, Run, status="cancelled") == 4


def test_same_baseline_hardware_measures_against_a_zero_skipping_array(
    api: TestClient, pg_settings: Settings
) -> None:
    """'same' compares SparseTrain with the dense training on its own zero-skipping array,
    whose natural ReLU sparsity already saves work: that baseline computes less (on this tiny
    stall-bound MLP its total may not fall), so the speedup left to the technique is at most
    the one against the dense array."""
    url = pg_settings.effective_database_url
    spec = {
        "name": "same baseline",
        "training": SPEC["training"],
        "techniques": [{"name": "sparsetrain", "prune_rate": 0.9}],
        "accelerators": ["edge"],
        "baseline_hardware": "same",
    }
    assert api.post("/api/v1/experiments", json=spec).status_code == 201
    for training_id in training_ids(url):
        assert run_training_job(url, training_id, task_id="t1") == "done"
    with session_scope(url) as db:
        runs = list(db.scalars(select(Run).order_by(Run.id)))
        baselines = {r.baseline_hardware: r for r in runs if r.is_baseline}
        (technique,) = [r for r in runs if not r.is_baseline]
        assert technique.baseline_hardware == "same"
        assert technique.baseline_run_id == baselines["same"].id
        assert baselines["same"].macs_skipped > 0 == baselines["dense"].macs_skipped
        assert baselines["same"].compute_cycles < baselines["dense"].compute_cycles
        assert baselines["same"].total_cycles <= baselines["dense"].total_cycles
        against_dense = baselines["dense"].total_cycles / technique.total_cycles
        assert technique.speedup == pytest.approx(
            baselines["same"].total_cycles / technique.total_cycles
        )
        assert technique.speedup <= against_dense
    listed = api.get("/api/v1/runs").json()
    items = listed["items"] if isinstance(listed, dict) else listed
    assert sorted(r["baseline_hardware"] for r in items) == ["dense", "same", "same"]
    exported = api.get("/api/v1/runs/export?format=csv").text.splitlines()
    header = exported[0].split(",")
    assert "baseline_hardware" in header and "baseline_run_id" in header


def test_a_run_that_did_not_learn_is_flagged_and_hit_rates_are_shown(
    api: TestClient, pg_settings: Settings
) -> None:
    """Two trainings of the same data: one learns, one with a learning rate far too small
    stays near chance (10% on ten classes) and is flagged; MERCURY's run detail lists the hit
    rate of each reusing layer per epoch."""
    url = pg_settings.effective_database_url
    spec = {
        "name": "learning",
        "training": {**TINY_TRAINING, "epochs": 2, "train_samples": 512, "test_samples": 256},
        "techniques": [{"name": "mercury", "signature_bits": 8}],
        "accelerators": ["edge"],
        "sweep": {"parameters": {"training.learning_rate": {"values": [1e-6, 0.05]}}},
    }
    api.post("/api/v1/experiments", json=spec)
    for training_id in training_ids(url):
        assert run_training_job(url, training_id, did_not_learn_margin=0.10) == "done"
    runs = api.get("/api/v1/runs", params={"sort": "id"}).json()["items"]
    for run in runs:
        learned = run["params"]["training.learning_rate"] == 0.05
        assert run["did_not_learn"] == (not learned), run
        assert (run["accuracy"] >= 0.2) == learned  # chance 0.1 + margin 0.1
    mercury = next(r for r in runs if r["technique"] == "mercury")
    detail = api.get(f"/api/v1/runs/{mercury['id']}").json()
    hit_rates = detail["figures_per_layer"]["hit_rate"]
    assert set(hit_rates) == {"1", "3"}  # the MLP's linear layers but the classifier
    assert all(len(v) == 2 and v[0] is not None and 0 <= v[0] <= 1 for v in [hit_rates["1"]])
    assert set(detail["figures_per_layer"]["density_bwd"]) == {"1", "3", "5"}
    assert all(0 <= epoch["hit_rate"] <= 1 for epoch in detail["epochs"])
    baseline = next(r for r in runs if r["technique"] == "baseline")
    base_figures = api.get(f"/api/v1/runs/{baseline['id']}").json()["figures_per_layer"]
    assert "hit_rate" not in base_figures and "density_fwd" in base_figures


def test_run_detail_names_what_its_training_ran_with(
    api: TestClient, pg_settings: Settings, request: pytest.FixtureRequest
) -> None:
    """The same config and seed are bit-identical only under the same PyTorch build, thread
    count and CPU instruction set: the run detail names those the training used, and nothing
    before it has trained."""
    url = pg_settings.effective_database_url
    request.addfinalizer(partial(torch.set_num_threads, torch.get_num_threads()))
    torch.set_num_threads(1)  # the worker's task sets it (worker/intra_op_threads.py)
    api.post("/api/v1/experiments", json={**SPEC, "accelerators": ["edge"]})
    queued = api.get("/api/v1/runs", params={"sort": "id"}).json()["items"]
    assert api.get(f"/api/v1/runs/{queued[0]['id']}").json()["training_environment"] is None
    for training_id in training_ids(url):
        assert run_training_job(url, training_id, task_id="t1") == "done"
    for run in api.get("/api/v1/runs", params={"sort": "id"}).json()["items"]:
        environment = api.get(f"/api/v1/runs/{run['id']}").json()["training_environment"]
        assert environment["torch"] == torch.__version__
        assert environment["intra_op_threads"] == 1
        assert environment["cpu_capability"] == torch.backends.cpu.get_cpu_capability()


def _nothing_stored(url: str, training_id: int) -> None:
    """No results: only the epochs stored as they were measured (how far it got) stay."""
    assert rows(url, EpochMetric, training_id=training_id) == TINY_TRAINING["epochs"]
    assert rows(url, LayerResult) == 0
    with session_scope(url) as db:
        training = db.get(Training, training_id)
        assert training.workload is None and training.test_accuracy is None
        for run in db.scalars(select(Run).where(Run.training_id == training_id)):
            assert run.total_cycles is None and run.summary is None


def _fails_once_and_is_never_delivered_again(
    settings: Settings, training_id: int, reason: str
) -> None:
    url = settings.effective_database_url
    with session_scope(url) as db:
        training = db.get(Training, training_id)
        assert (training.status, training.attempts) == ("failed", 1)
        assert reason in training.error and "heartbeat" not in training.error
        runs = list(db.scalars(select(Run).where(Run.training_id == training_id)))
        assert {r.status for r in runs} == {"failed"}
        assert all(reason in r.error for r in runs)
    # Nothing for the reconciler to take back or send again, and a stray duplicate message
    # finds the training finished.
    report = reconcile_once(settings, make_celery(settings, sender=True), grace_seconds=0)
    assert training_id not in report.expired + report.requeued + report.failed
    assert run_training_job(url, training_id, task_id="duplicate") == "failed"
    with session_scope(url) as db:
        assert db.get(Training, training_id).attempts == 1
    _nothing_stored(url, training_id)


def test_an_accelerator_row_outside_the_ranges_fails_once_with_the_reason(
    api: TestClient, pg_settings: Settings
) -> None:
    """Written straight into the database (the API refuses it): the store step's validation
    fails the training at once, instead of the delivery dying and being re-delivered."""
    url = pg_settings.effective_database_url
    api.post("/api/v1/experiments", json={**SPEC, "techniques": [{"name": "baseline"}]})
    (training_id,) = training_ids(url)
    with session_scope(url) as db:
        for run in db.scalars(select(Run)):
            run.accelerator_config = {**run.accelerator_config, "clock_mhz": 5e-324}
    assert run_training_job(url, training_id, task_id="only") == "failed"
    _fails_once_and_is_never_delivered_again(pg_settings, training_id, "clock_mhz")


def test_a_non_finite_simulation_fails_once_and_stores_nothing(
    api: TestClient, pg_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config that validates but simulates to Infinity (as 5e-324 MHz did before the ranges):
    PostgreSQL refuses Infinity in JSON, so it must never get that far."""
    import worker.storage

    real = worker.storage.AcceleratorConfig

    class Unchecked:  # validates as usual, then sets a clock no range would allow
        @staticmethod
        def model_validate(data: dict) -> object:
            return real.model_validate(data).model_copy(update={"clock_mhz": 5e-324})

    monkeypatch.setattr(worker.storage, "AcceleratorConfig", Unchecked)
    url = pg_settings.effective_database_url
    api.post("/api/v1/experiments", json={**SPEC, "techniques": [{"name": "baseline"}]})
    (training_id,) = training_ids(url)
    assert run_training_job(url, training_id, task_id="only") == "failed"
    _fails_once_and_is_never_delivered_again(
        pg_settings, training_id, "simulation produced a non-finite value: totals.seconds"
    )
