"""The iso-area comparison through the real pipeline on PostgreSQL: a technique's training stored
before its baseline's gets its iso-area figures when the baseline's lands, equal to the
simulator's choice on the baseline training's workload; the API, the seed groups, the grouped
summary and the export serve them."""

from __future__ import annotations

import csv
import io

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.db.models import Run, Training
from backend.db.session import session_scope
from backend.settings import Settings
from backend.sim import Workload
from backend.sim.iso_area import iso_area
from backend.specs.accelerator import AcceleratorConfig
from tests.pipeline.conftest import TINY_TRAINING
from worker.jobs import run_training_job
from worker.storage import refresh_iso_area

SPEC = {
    "name": "iso-area",
    "training": TINY_TRAINING,
    "techniques": [{"name": "sparsetrain", "prune_rate": 0.9}],
    "accelerators": ["edge", "sparsetrain-like"],
    "seeds": [0, 1],
}
ISO_COLUMNS = ("iso_area_speedup", "iso_area_energy_ratio", "iso_area")


def _runs(url: str) -> list[Run]:
    with session_scope(url) as db:
        runs = list(db.scalars(select(Run).order_by(Run.id)))
        db.expunge_all()
        return runs


def test_a_technique_stored_before_its_baseline_gets_its_iso_area_figures(
    api: TestClient, pg_settings: Settings
) -> None:
    url = pg_settings.effective_database_url
    experiment = api.post("/api/v1/experiments", json=SPEC).json()
    with session_scope(url) as db:
        trainings = {t.id: t.technique for t in db.scalars(select(Training))}
    techniques = [i for i, technique in trainings.items() if technique != "baseline"]
    baselines = [i for i, technique in trainings.items() if technique == "baseline"]
    assert len(techniques) == len(baselines) == 2  # one of each per seed

    for training_id in techniques:
        assert run_training_job(url, training_id, task_id="technique") == "done"
    stored_first = [r for r in _runs(url) if not r.is_baseline]
    assert [r.status for r in stored_first] == ["done"] * 4
    assert all(getattr(r, c) is None for r in stored_first for c in ISO_COLUMNS)
    assert all(r.speedup is None for r in stored_first)
    assert all(0 <= r.stall_share <= 1 for r in stored_first)

    for training_id in baselines:
        assert run_training_job(url, training_id, task_id="baseline") == "done"
    runs = _runs(url)
    by_id = {run.id: run for run in runs}
    with session_scope(url) as db:
        workloads = {t.id: Workload.from_dict(t.workload) for t in db.scalars(select(Training))}
    for run in runs:
        assert run.stall_share == pytest.approx(run.stall_cycles / run.total_cycles, rel=1e-12)
        if run.is_baseline:
            assert all(getattr(run, c) is None for c in ISO_COLUMNS)
            continue
        baseline = by_id[run.baseline_run_id]
        accel = AcceleratorConfig.model_validate(run.accelerator_config)
        expected = iso_area(workloads[baseline.training_id], accel, run.area_mm2)
        assert expected is not None
        assert run.iso_area == expected.to_dict()
        assert run.iso_area_speedup == pytest.approx(expected.speedup(run.seconds), rel=1e-12)
        assert run.iso_area_energy_ratio == pytest.approx(
            expected.energy_ratio(run.energy_pj), rel=1e-12
        )
        # The baseline is the same array, dense, and a member of the family within the area.
        assert run.iso_area["fastest"]["seconds"] <= baseline.seconds * (1 + 1e-12)
        assert run.iso_area_speedup <= run.speedup * (1 + 1e-12)
        assert run.iso_area_energy_ratio >= run.energy_ratio * (1 - 1e-12)
        assert run.iso_area["fastest"]["area_mm2"] <= run.area_mm2

    # Idempotent: computing again changes nothing.
    with session_scope(url) as db:
        refresh_iso_area(db, experiment["id"])
    assert [(r.id, r.iso_area_speedup, r.iso_area) for r in _runs(url)] == [
        (r.id, r.iso_area_speedup, r.iso_area) for r in runs
    ]

    technique_run = next(r for r in runs if not r.is_baseline)
    shown = api.get(f"/api/v1/runs/{technique_run.id}").json()
    assert shown["iso_area_speedup"] == technique_run.iso_area_speedup
    assert shown["iso_area"]["fastest"]["rows"] == technique_run.iso_area["fastest"]["rows"]
    assert shown["stall_share"] == technique_run.stall_share

    groups = api.get("/api/v1/runs/groups", params={"experiment_id": experiment["id"]}).json()
    for group in groups:
        members = [by_id[i] for i in group["run_ids"]]
        stalls = [m.stall_share for m in members]
        assert group["stall_share"]["mean"] == pytest.approx(sum(stalls) / len(stalls))
        base_stalls = [by_id[m.baseline_run_id or m.id].stall_share for m in members]
        assert group["baseline_stall_share"]["mean"] == pytest.approx(
            sum(base_stalls) / len(base_stalls)
        )
        if group["is_baseline"]:
            assert group["iso_area_speedup"] is None and group["iso_area"] is None
            continue
        speedups = [m.iso_area_speedup for m in members]
        assert group["iso_area_speedup"]["n"] == 2
        assert group["iso_area_speedup"]["mean"] == pytest.approx(sum(speedups) / 2)
        assert group["iso_area"] == members[0].iso_area

    summary = api.get(
        "/api/v1/runs/summary", params={"experiment_id": experiment["id"], "by": "is_baseline"}
    ).json()
    technique_summary = next(g for g in summary if g["value"] is False)
    speedups = [r.iso_area_speedup for r in runs if not r.is_baseline]
    assert technique_summary["metrics"]["iso_area_speedup"]["mean"] == pytest.approx(
        sum(speedups) / len(speedups)
    )

    exported = api.get(
        "/api/v1/runs/export", params={"experiment_id": experiment["id"], "format": "csv"}
    ).text
    rows = {int(row["id"]): row for row in csv.DictReader(io.StringIO(exported))}
    for run in runs:
        cell = rows[run.id]["iso_area_speedup"]
        assert (
            (cell == "") if run.is_baseline else float(cell) == pytest.approx(run.iso_area_speedup)
        )
        assert float(rows[run.id]["stall_share"]) == pytest.approx(run.stall_share)
