"""What the dashboard's charts need of each run, in one read: metrics, layers, epochs, front."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from backend.analysis.pareto import front_2d
from backend.api.access import Viewer, visible_to
from backend.api.schemas import RunMeasuresOut
from backend.db.models import EpochMetric, Experiment, LayerResult, Run
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
    on_front: bool = Field(description="undominated among these runs (speedup up, drop down)")
    accelerator: dict[str, Any] = Field(description="array size, clock and DRAM bandwidth")
    summary: dict[str, Any] = Field(description="energy by level and operand, seconds")
    layers: list[dict[str, Any]]
    epochs: list[dict[str, Any]]


class ChartData(BaseModel):
    runs: list[ChartRun]


def chart_data(db: Session, viewer: Viewer, run_ids: list[int]) -> ChartData:
    """The runs among `run_ids` that `viewer` may see, in the order asked, with their details."""
    wanted = list(dict.fromkeys(run_ids))[:MAX_CHART_RUNS]
    if not wanted:
        return ChartData(runs=[])
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
    _mark_front(out)
    return ChartData(runs=out)


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
        on_front=False,
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


def _mark_front(runs: list[ChartRun]) -> None:
    """Flag the speedup / accuracy-drop Pareto front among the finished runs shown."""
    points = [r for r in runs if r.speedup is not None and r.accuracy_drop is not None]
    mask = front_2d([-r.speedup for r in points], [r.accuracy_drop for r in points])  # type: ignore[operator]
    for run, on_front in zip(points, mask, strict=True):
        run.on_front = on_front
