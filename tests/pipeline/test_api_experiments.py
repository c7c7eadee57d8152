"""Submitting experiments through the API, against real PostgreSQL and Redis (no worker)."""

import json

import redis
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text

from backend.api.app import create_app
from backend.db.models import Experiment, Run, Training
from backend.db.session import session_scope
from backend.settings import Settings
from tests.pipeline.conftest import TINY_TRAINING

SPEC = {
    "name": "mercury vs baseline",
    "training": TINY_TRAINING,
    "techniques": [{"name": "mercury"}, {"name": "sparsetrain", "prune_rate": 0.8}],
    "accelerators": ["edge", "tpu-like"],
}


def count(settings: Settings, model: type) -> int:
    with session_scope(settings.effective_database_url) as db:
        return db.scalar(select(func.count()).select_from(model)) or 0


def test_submit_stores_runs_and_queues_one_task_per_training(
    api: TestClient, pg_settings: Settings, redis_db_url: str
) -> None:
    response = api.post("/api/v1/experiments", json=SPEC)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["total_runs"] == 6  # (baseline, mercury, sparsetrain) x 2 accelerators
    assert body["trainings"] == 3
    assert body["run_counts"]["queued"] == 6

    queued = redis.Redis.from_url(redis_db_url).lrange("orrery", 0, -1)
    tasks = [json.loads(message)["headers"] for message in queued]
    assert sorted(t["task"] for t in tasks) == ["orrery.train"] * 3
    with session_scope(pg_settings.effective_database_url) as db:
        task_ids = set(db.scalars(select(Training.task_id)))
        assert {t["id"] for t in tasks} == task_ids
        runs = list(db.scalars(select(Run)))
        for run in runs:
            if run.is_baseline:
                assert run.baseline_run_id is None
            else:
                baseline = db.get(Run, run.baseline_run_id)
                assert baseline.is_baseline
                assert baseline.accelerator_name == run.accelerator_name
                assert not baseline.accelerator_config["zero_skipping"]["enabled"]
                assert run.accelerator_config["zero_skipping"]["enabled"] == (
                    run.technique == "sparsetrain"
                )
                assert run.accelerator_config["mcache"]["enabled"] == (run.technique == "mercury")


def test_preview_counts_without_storing(api: TestClient, pg_settings: Settings) -> None:
    response = api.post("/api/v1/experiments/preview", json=SPEC)
    assert response.json() == {"runs": 6, "trainings": 3, "baseline_runs": 2}
    assert count(pg_settings, Experiment) == 0


def test_bad_specs_get_422_naming_field_and_reason(api: TestClient, pg_settings: Settings) -> None:
    cases = [
        (
            {**SPEC, "training": {**TINY_TRAINING, "epochs": 0}},
            ["training", "epochs"],
            "greater than",
        ),
        ({**SPEC, "accelerators": ["gpu"]}, ["accelerators"], "unknown preset 'gpu'"),
        ({**SPEC, "techniques": [{"name": "magic"}]}, ["techniques", 0], "magic"),
        ({**SPEC, "techniques": []}, ["techniques"], "at least 1"),
        (
            {**SPEC, "sweep": {"parameters": {"mercury.signature_bits": {"values": [8, 99]}}}},
            ["sweep", "parameters", "mercury.signature_bits"],
            "less than or equal to 64",
        ),
        ({k: v for k, v in SPEC.items() if k != "name"}, ["name"], "Field required"),
    ]
    for spec, loc, reason in cases:
        response = api.post("/api/v1/experiments", json=spec)
        assert response.status_code == 422, (spec, response.text)
        errors = response.json()["detail"]
        assert any(e["loc"][1 : 1 + len(loc)] == loc and reason in json.dumps(e) for e in errors), (
            loc,
            errors,
        )
    assert count(pg_settings, Experiment) == 0


def test_expansion_limit_gives_a_clear_422(pg_settings: Settings) -> None:
    settings = pg_settings.model_copy(update={"max_runs_per_experiment": 10})
    with TestClient(create_app(settings)) as client:
        spec = {**SPEC, "sweep": {"parameters": {"accelerator.rows": {"values": [4, 8, 16]}}}}
        response = client.post("/api/v1/experiments", json=spec)
    assert response.status_code == 422
    assert "over the limit of 10" in response.json()["detail"][0]["msg"]


def test_unreachable_broker_gives_503_and_stores_nothing(pg_settings: Settings) -> None:
    settings = pg_settings.model_copy(update={"broker_url": "redis://127.0.0.1:1/0"})
    with TestClient(create_app(settings)) as client:
        before = client.get("/api/v1/experiments").json()["total"]
        response = client.post("/api/v1/experiments", json=SPEC)
        after = client.get("/api/v1/experiments").json()["total"]
    assert response.status_code == 503
    assert "task queue is unreachable" in response.json()["detail"]
    assert before == after == 0
    assert count(pg_settings, Run) == 0


def test_cancel_marks_queued_runs_cancelled(api: TestClient, pg_settings: Settings) -> None:
    experiment = api.post("/api/v1/experiments", json=SPEC).json()
    response = api.post(f"/api/v1/experiments/{experiment['id']}/cancel")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "cancelled"
    assert body["run_counts"]["cancelled"] == 6
    with session_scope(pg_settings.effective_database_url) as db:
        assert set(db.scalars(select(Training.status))) == {"cancelled"}
        assert all(db.scalars(select(Training.cancel_requested)))


def test_events_stream_ends_when_the_experiment_is_finished(api: TestClient) -> None:
    experiment = api.post("/api/v1/experiments", json=SPEC).json()
    api.post(f"/api/v1/experiments/{experiment['id']}/cancel")
    with api.stream("GET", f"/api/v1/experiments/{experiment['id']}/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        text = "".join(response.iter_text())
    events = [block for block in text.split("\n\n") if block.strip()]
    names = [block.split("\n")[0].removeprefix("event: ") for block in events]
    assert names.count("run") == 6
    assert names[-1] == "end"
    assert '"status": "cancelled"' in events[-1]


def test_an_open_events_stream_holds_no_database_connection(
    api: TestClient, pg_settings: Settings
) -> None:
    """A dashboard watching an experiment for an hour must not keep a pooled connection (idle
    in a transaction) all that time: the stream polls with short sessions of its own."""
    experiment = api.post("/api/v1/experiments", json=SPEC).json()
    url = f"/api/v1/experiments/{experiment['id']}/events?interval=0.2"
    database = pg_settings.effective_database_url.rsplit("/", 1)[1]
    with api.stream("GET", url) as response:
        lines = response.iter_lines()
        assert next(lines) == "event: run"
        with session_scope(pg_settings.effective_database_url) as db:
            idle_in_transaction = db.scalar(
                select(func.count())
                .select_from(text("pg_stat_activity"))
                .where(text("datname = :name AND state = 'idle in transaction'"))
                .params(name=database)
            )
    assert idle_in_transaction == 0


def test_unknown_experiment_is_404(api: TestClient) -> None:
    assert api.get("/api/v1/experiments/9999").status_code == 404
    assert api.post("/api/v1/experiments/9999/cancel").status_code == 404
    assert api.get("/api/v1/experiments/9999/events").status_code == 404


def test_implausible_physical_fields_get_422_naming_the_field(
    api: TestClient, pg_settings: Settings
) -> None:
    """A tiny but finite clock passed "greater than 0" and made every simulated time infinite."""
    cases = [
        ({**SPEC, "accelerators": [{"name": "tiny", "clock_mhz": 5e-324}]}, "clock_mhz"),
        ({**SPEC, "accelerators": [{"name": "slow", "dram_bandwidth": 1e-300}]}, "dram_bandwidth"),
        ({**SPEC, "accelerators": [{"name": "hot", "energy": {"dram": 1e300}}]}, "dram"),
        (
            {**SPEC, "sweep": {"parameters": {"accelerator.clock_mhz": {"values": [5e-324]}}}},
            "clock_mhz",
        ),
    ]
    for spec, field in cases:
        response = api.post("/api/v1/experiments", json=spec)
        assert response.status_code == 422, (spec, response.text)
        errors = response.json()["detail"]
        assert any(field in json.dumps(e["loc"]) for e in errors), errors
        assert any("greater than or equal" in e["msg"] or "less than" in e["msg"] for e in errors)
    assert count(pg_settings, Experiment) == 0
