"""What the dashboard's charts need of each run, in one read: metrics, layers, epochs; and the
runs' design points (runs equal but for the seed: `group_key`), each figure as its mean and 95%
interval over the seeds shown, with the Pareto front among the technique design points (a
baseline is the reference every speedup is measured against, never a point of the front)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from backend.analysis.groups import estimate
from backend.api.access import Viewer, visible_to
from backend.api.schemas import EstimateOut, RunMeasuresOut
from backend.db.models import EpochMetric, Experiment, LayerResult, Run
from backend.sim.pareto import front_2d
from backend.specs.figures import RUN_MEASURES, SIMULATED

MAX_CHART_RUNS = 200
ACCELERATOR_FIELDS = ("rows", "cols", "dataflow", "clock_mhz", "dram_bandwidth", "word_bytes")
SUMMARY_FIELDS = (
    "energy_by_level", "energy_by_operand", "seconds", "utilization", "array_cycles",
    "exposed_extension_cycles",
)  # fmt: skip
LAYER_FIELDS = ("layer", "training_pass", "role", *(measure.key for measure in SIMULATED))
EPOCH_FIELDS = ("epoch", "train_loss", "test_loss", "train_accuracy", "test_accuracy", "figures")
RUN_FIELDS = (
    "id", "experiment_id", "training_id", "technique", "model", "dataset", "accelerator_name",
    "seed", "is_baseline", "status", "progress", "params",
    *(measure.key for measure in RUN_MEASURES),
)  # fmt: skip


class ChartRun(RunMeasuresOut):  # type: ignore[misc,valid-type]
    id: int
    experiment_id: int
    training_id: int | None
    technique: str
    model: str
    dataset: str
    accelerator_name: str
    seed: int
    is_baseline: bool
    status: str
    progress: float
    params: dict[str, Any]
    did_not_learn: bool | None = Field(description="accuracy below chance + the margin")
    group: str = Field(description="the seed-group key (runs equal but for the seed share it)")
    baseline_accuracy: float | None = Field(description="accuracy of the run's baseline")
    accuracy_drop: float | None = Field(description="baseline accuracy - run accuracy")
    accelerator: dict[str, Any] = Field(description="array size, clock and DRAM bandwidth")
    summary: dict[str, Any] = Field(description="energy by level and operand, seconds")
    layers: list[dict[str, Any]]
    epochs: list[dict[str, Any]]


class DesignPoint(BaseModel):
    """The finished runs shown that differ only in their seed, as one point."""

    group: str = Field(description="the seed-group key its runs share")
    technique: str
    accelerator_name: str
    is_baseline: bool
    params: dict[str, Any] = Field(description="its swept values, seed left out")
    run_ids: list[int]
    seeds: list[int]
    speedup: EstimateOut | None
    accuracy: EstimateOut | None
    accuracy_drop: EstimateOut | None = Field(description="paired by seed with its baseline")
    energy_pj: EstimateOut | None
    on_front: bool = Field(
        description="a technique design point undominated by mean (speedup up, accuracy drop "
        "down) among the technique design points shown; never a baseline"
    )


class ChartData(BaseModel):
    runs: list[ChartRun]
    design_points: list[DesignPoint] = Field(default_factory=list)


def chart_data(db: Session, viewer: Viewer, run_ids: list[int]) -> ChartData:
    """The runs among `run_ids` that `viewer` may see, in the order asked, with their details."""
    wanted = list(dict.fromkeys(run_ids))[:MAX_CHART_RUNS]
    if not wanted:
        return ChartData(runs=[], design_points=[])
    baseline = aliased(Run)
    rows = db.execute(
        select(Run, baseline.accuracy)
        .join(Experiment, Experiment.id == Run.experiment_id)
        .outerjoin(baseline, baseline.id == Run.baseline_run_id)
        .where(Run.id.in_(wanted), visible_to(viewer, db))
    ).all()
    by_id = {run.id: (run, base_acc) for run, base_acc in rows}
    found = [by_id[i] for i in wanted if i in by_id]
    layers = _layers(db, [run.id for run, _ in found])
    epochs = _epochs(db, {run.training_id for run, _ in found if run.training_id is not None})
    out = [
        _chart_run(run, base_acc, layers.get(run.id, []), epochs.get(run.training_id, []))
        for run, base_acc in found
    ]
    return ChartData(runs=out, design_points=design_points(out))


def _chart_run(
    run: Run, base_acc: float | None, layers: list[dict[str, Any]], epochs: list[dict[str, Any]]
) -> ChartRun:
    reference = run.accuracy if run.is_baseline else base_acc
    drop = reference - run.accuracy if reference is not None and run.accuracy is not None else None
    summary = run.summary or {}
    return ChartRun(
        **{name: getattr(run, name) for name in RUN_FIELDS},
        did_not_learn=run.did_not_learn,
        group=run.group_key,
        baseline_accuracy=reference,
        accuracy_drop=drop,
        accelerator={k: run.accelerator_config.get(k) for k in ACCELERATOR_FIELDS},
        summary={k: summary[k] for k in SUMMARY_FIELDS if k in summary},
        layers=layers,
        epochs=epochs,
    )


def _grouped(
    db: Session, model: Any, key: Any, fields: Sequence[str], keys: Iterable[int], order: Any
) -> dict[int, list[dict[str, Any]]]:
    """Rows of `model` whose `key` is in `keys`, as dicts of `fields`, grouped by key."""
    grouped: dict[int, list[dict[str, Any]]] = defaultdict(list)
    keys = list(keys)
    if not keys:
        return grouped
    columns = [getattr(model, name) for name in fields]
    query = select(key, *columns).where(key.in_(keys)).order_by(key, order)
    for row in db.execute(query):
        grouped[row[0]].append(dict(zip(fields, row[1:], strict=True)))
    return grouped


def _layers(db: Session, run_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    return _grouped(
        db, LayerResult, LayerResult.run_id, LAYER_FIELDS, run_ids, LayerResult.position
    )


def _epochs(db: Session, training_ids: set[int]) -> dict[int, list[dict[str, Any]]]:
    """Each training's epochs, their figures spread into fields of their own (as `EpochOut`)."""
    grouped = _grouped(
        db, EpochMetric, EpochMetric.training_id, EPOCH_FIELDS, training_ids, EpochMetric.epoch
    )
    for epochs in grouped.values():
        for epoch in epochs:
            epoch.update(epoch.pop("figures") or {})
    return grouped


def _estimate(values: list[float | None]) -> EstimateOut | None:
    found = estimate([value for value in values if value is not None])
    return None if found is None else EstimateOut(**asdict(found))


def design_points(runs: list[ChartRun]) -> list[DesignPoint]:
    """The finished runs grouped by design point (in the order of each one's first run), with
    the speedup / accuracy-drop front marked among the technique points by their means."""
    grouped: dict[str, list[ChartRun]] = defaultdict(list)
    for run in runs:
        if run.status == "done":
            grouped[run.group].append(run)
    points = [
        DesignPoint(
            group=group,
            technique=members[0].technique,
            accelerator_name=members[0].accelerator_name,
            is_baseline=members[0].is_baseline,
            params={k: v for k, v in members[0].params.items() if k != "seed"},
            run_ids=[run.id for run in members],
            seeds=[run.seed for run in members],
            speedup=_estimate([run.speedup for run in members]),
            accuracy=_estimate([run.accuracy for run in members]),
            accuracy_drop=_estimate([run.accuracy_drop for run in members]),
            energy_pj=_estimate([run.energy_pj for run in members]),
            on_front=False,
        )
        for group, members in grouped.items()
    ]
    ranked = [
        p for p in points if not p.is_baseline and p.speedup and p.accuracy_drop and p.accuracy
    ]
    mask = front_2d([-p.speedup.mean for p in ranked], [p.accuracy_drop.mean for p in ranked])  # type: ignore[union-attr]
    for point, on_front in zip(ranked, mask, strict=True):
        point.on_front = on_front
    return points
