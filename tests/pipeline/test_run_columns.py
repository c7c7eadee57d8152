"""Any field or figure of a run as a column: GET /runs/columns lists them; the list returns the
asked ones per row (`column=`), sorts and range-filters by them, and the summary groups by
several at once (PostgreSQL and SQLite, against values read from the stored runs in Python)."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.db.models import EpochMetric, Run, Training
from backend.db.session import session_scope
from backend.specs.figures import LAYER_MEASURES, RUN_FIGURES
from backend.specs.techniques import EPOCH_FIGURES
from tests.pipeline.conftest import TINY_TRAINING

SPEC = {
    "name": "columns",
    "training": TINY_TRAINING,
    "techniques": [{"name": "mercury"}, [{"name": "mercury"}, {"name": "sparsetrain"}]],
    "accelerators": ["edge", "tpu-like"],
    "seeds": [0, 1],
    "sweep": {"parameters": {"mercury.signature_bits": {"values": [8, 16]}}},
}
FIGURES = {figure.key: figure for figure in EPOCH_FIGURES}


@pytest.fixture
def seeded(any_database: tuple[TestClient, str]) -> tuple[TestClient, dict]:
    """An experiment's runs given random statuses, figures, times and epochs; with the runs'
    reference values per column, read from the stored run in Python."""
    api, database_url = any_database
    experiment = api.post("/api/v1/experiments", json=SPEC).json()
    rng = random.Random(27)
    with session_scope(database_url) as db:
        runs = list(db.scalars(select(Run).where(Run.experiment_id == experiment["id"])))
        for run in runs:
            run.status = rng.choice(["done", "done", "done", "queued", "failed"])
            if run.status != "queued":
                run.started_at = run.created_at + timedelta(seconds=rng.uniform(0, 5))
                run.finished_at = run.started_at + timedelta(seconds=rng.uniform(1, 900))
            if run.status == "done":
                run.accuracy = rng.uniform(0.1, 0.99)
                run.total_cycles = rng.randrange(10**5, 10**7)
                run.stall_cycles = rng.randrange(0, run.total_cycles)
                run.stall_share = run.stall_cycles / run.total_cycles  # stored, as the worker does
                run.dram_bytes = rng.randrange(10**4, 10**9)
                run.energy_pj = rng.uniform(1e6, 1e9)
                run.seconds = rng.uniform(1e-3, 1.0)
        for training in db.scalars(select(Training)):
            for epoch in (1, 2):
                figures = {"density_fwd": rng.random()}
                if rng.random() < 0.7:
                    figures["hit_rate"] = rng.random()
                db.add(
                    EpochMetric(training_id=training.id, epoch=epoch, figures=figures, per_layer={})
                )
    with session_scope(database_url) as db:
        runs = list(db.scalars(select(Run).where(Run.experiment_id == experiment["id"])))
        epochs: dict[int, list[dict]] = {}
        for metric in db.scalars(select(EpochMetric).order_by(EpochMetric.epoch)):
            epochs.setdefault(metric.training_id, []).append(metric.figures)
        by_id = {run.id: run for run in runs}
        reference = {run.id: _reference(run, by_id, epochs) for run in runs}
    return api, reference


def _reference(run: Run, runs: dict[int, Run], epochs: dict[int, list[dict]]) -> dict:
    """Each tested column's value for `run`, the slow way."""
    techniques = {p["name"]: p for p in run.technique_params}
    baseline = run if run.is_baseline else runs.get(run.baseline_run_id or -1)
    done = run.status == "done"
    measured = epochs.get(run.training_id or -1, [])
    hit_rates = [e.get("hit_rate") for e in measured]
    return {
        "training.batch_size": run.training_config["batch_size"],
        "training.optimizer": run.training_config["optimizer"],
        "accelerator.rows": run.accelerator_config["rows"],
        "accelerator.energy.dram": run.accelerator_config["energy"]["dram"],
        "accelerator.zero_skipping.enabled": run.accelerator_config["zero_skipping"]["enabled"],
        "mercury.signature_bits": techniques.get("mercury", {}).get("signature_bits"),
        "sparsetrain.prune_rate": techniques.get("sparsetrain", {}).get("prune_rate"),
        "accuracy_delta": None
        if run.accuracy is None or baseline is None or baseline.accuracy is None
        else run.accuracy - baseline.accuracy,
        "duration": (run.finished_at - run.started_at).total_seconds() if done else None,
        "stall_share": run.stall_cycles / run.total_cycles if done else None,
        "baseline_stall_share": None if baseline is None else baseline.stall_share,
        "energy_delay": run.energy_pj * run.seconds if done else None,
        "dram_words": run.dram_bytes / run.accelerator_config["word_bytes"] if done else None,
        "epoch.hit_rate": FIGURES["hit_rate"].of_training(hit_rates)
        if any(v is not None for v in hit_rates)
        else None,
    }


def _same(got: Any, want: Any, key: str) -> bool:
    if isinstance(want, float) and got is not None:
        # SQLite reads timestamps to the millisecond
        return got == pytest.approx(want, rel=1e-6, abs=2e-3 if key == "duration" else 1e-9)
    return got == want


def test_every_column_is_listed_with_how_it_is_read(seeded: tuple[TestClient, dict]) -> None:
    api, _ = seeded
    columns = {c["key"]: c for c in api.get("/api/v1/runs/columns").json()}
    assert columns["energy_pj"]["unit"] == "pJ" and columns["speedup"]["unit"] == "×"
    assert columns["accuracy_delta"] | {"description": ""} == {
        "key": "accuracy_delta", "label": "Δ accuracy", "group": "figure", "kind": "number",
        "unit": "pt", "description": "", "sortable": True, "groupable": False, "in_row": False,
    }  # fmt: skip
    assert columns["epoch.hit_rate"]["sortable"] is False
    assert columns["mercury.signature_bits"]["groupable"] is True
    assert columns["training.optimizer"]["kind"] == "text"
    assert columns["accelerator.zero_skipping.enabled"]["kind"] == "bool"
    # every field of a run row is a column too (the table's defaults among them)
    row = api.get("/api/v1/runs", params={"limit": 1}).json()["items"][0]
    assert set(row) - {"columns"} <= set(columns)


def test_the_declared_figures_are_served_and_summarised(seeded: tuple[TestClient, dict]) -> None:
    api, _ = seeded
    served = {m["key"]: m for m in api.get("/api/v1/figures").json()["measures"]}
    declared = {m.key: m for m in (*RUN_FIGURES, *LAYER_MEASURES)}
    assert list(served) == list(declared)
    for key, measure in declared.items():
        assert served[key] == {
            "key": key, "label": measure.label, "unit": measure.unit,
            "display_unit": measure.display_unit, "description": measure.description,
            "per_run": measure in RUN_FIGURES, "per_layer": measure in LAYER_MEASURES,
            "stored": measure.stored, "total": measure.total, "summarised": measure.summarised,
            "higher_is_better": measure.higher_is_better,
        }  # fmt: skip
    assert served["macs_actual"]["total"] == "sum" and served["utilization"]["total"] == "derived"
    assert served["speedup"]["display_unit"] == "×" and not served["accuracy_delta"]["stored"]
    # Every summary answers the summarised figures, and only those.
    summarised = [key for key, m in served.items() if m["summarised"]]
    assert "baseline_stall_share" in summarised and "loss" not in summarised
    (group, *_) = api.get("/api/v1/runs/summary", params={"by": "technique"}).json()
    assert list(group["metrics"]) == summarised
    (point, *_) = api.get("/api/v1/runs/groups").json()
    assert [key for key in point if key in served] == summarised
    columns = {c["key"] for c in api.get("/api/v1/runs/columns").json()}
    assert set(served) - {m.key for m in LAYER_MEASURES if m not in RUN_FIGURES} <= columns


def test_columns_come_with_the_rows_and_sort_on_the_server(
    seeded: tuple[TestClient, dict],
) -> None:
    api, reference = seeded
    keys = list(next(iter(reference.values())))
    page = api.get("/api/v1/runs", params={"column": keys, "limit": 1000, "sort": "id"}).json()
    assert page["total"] == len(reference) == 20
    for row in page["items"]:
        for key in keys:
            got = row[key] if key in row else row["columns"][key]  # a stored figure is in the row
            assert _same(got, reference[row["id"]][key], key), (row["id"], key)
        assert "accuracy" not in row["columns"]  # a field of the row is not repeated
    sortable = [k for k in keys if k != "epoch.hit_rate"]
    for key in sortable:
        for descending in (False, True):
            got = api.get(
                "/api/v1/runs",
                params={"sort": f"{'-' if descending else ''}{key}", "limit": 1000},
            ).json()["items"]
            known = sorted(
                (i for i in reference if reference[i][key] is not None),
                key=lambda i: (reference[i][key], -i if descending else i),
                reverse=descending,
            )
            unknown = sorted(i for i in reference if reference[i][key] is None)
            # ties keep the id order; runs without the value come last either way
            assert [r["id"] for r in got] == known + unknown, key
    shares = api.get("/api/v1/runs", params={"range": "stall_share:0.5:", "limit": 1000}).json()
    want = {i for i, values in reference.items() if (values["stall_share"] or 0) >= 0.5}
    assert {r["id"] for r in shares["items"]} == want and want
    unknown = api.get("/api/v1/runs", params={"column": "nope"})
    assert unknown.status_code == 422 and "column: unknown column 'nope'" in unknown.text
    unsorted = api.get("/api/v1/runs", params={"sort": "epoch.hit_rate"})
    assert unsorted.status_code == 422


def test_summary_groups_by_several_columns_and_counts_who_has_each_figure(
    seeded: tuple[TestClient, dict],
) -> None:
    api, reference = seeded
    answer = api.get(
        "/api/v1/runs/summary", params={"by": ["technique", "accelerator_name", "model"]}
    )
    assert answer.status_code == 200, answer.text
    groups = answer.json()
    runs = api.get("/api/v1/runs", params={"limit": 1000}).json()["items"]
    expected: dict[tuple, list[dict]] = {}
    for run in runs:
        expected.setdefault((run["technique"], run["accelerator_name"], run["model"]), []).append(
            run
        )
    assert [tuple(g["value"]) for g in groups] == sorted(expected)
    for group in groups:
        members = expected[tuple(group["value"])]
        assert group["runs"] == len(members)
        accuracies = [r["accuracy"] for r in members if r["accuracy"] is not None]
        assert group["metrics"]["accuracy"]["n"] == len(accuracies)
        assert group["metrics"]["accuracy"]["n"] == sum(r["status"] == "done" for r in members)
        if accuracies:
            mean = sum(accuracies) / len(accuracies)
            assert group["metrics"]["accuracy"]["mean"] == pytest.approx(mean)
        deltas = [reference[r["id"]]["accuracy_delta"] for r in members]
        assert group["metrics"]["accuracy_delta"]["n"] == sum(d is not None for d in deltas)
    by_bits = api.get(
        "/api/v1/runs/summary", params={"by": ["mercury.signature_bits", "sparsetrain.prune_rate"]}
    ).json()
    assert [g["value"][0] for g in by_bits] == [8, 8, 16, 16, None]
    refused = api.get("/api/v1/runs/summary", params={"by": ["technique", "speedup"]})
    assert refused.status_code == 422 and "'speedup' is not a groupable column" in refused.text
    # Up to three columns, as the run table groups; a fourth is refused naming the field.
    four = api.get(
        "/api/v1/runs/summary",
        params={"by": ["technique", "accelerator_name", "model", "dataset"]},
    )
    assert four.status_code == 422, four.text
    error = four.json()["detail"][0]
    assert error["loc"] == ["query", "by"] and "at most 3" in error["msg"], error
