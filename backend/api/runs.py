"""Runs: filtered pages, one run in full, comparison with baselines, seed groups, Pareto front,
export."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import Response, StreamingResponse
from sqlalchemy import case, func, select
from sqlalchemy.orm import aliased, selectinload

from backend.analysis.groups import run_group_key
from backend.analysis.pareto import front_2d, front_3d
from backend.api.deps import DbSession
from backend.api.run_groups import run_groups
from backend.api.run_query import RunFilters, filtered_runs, run_filters, visible_to
from backend.api.schemas import (
    Comparison,
    EpochOut,
    LayerOut,
    Page,
    ParetoPoint,
    RunDetail,
    RunGroup,
    RunOut,
)
from backend.api.security import CurrentUser
from backend.db.models import EpochMetric, Experiment, Run
from backend.db.session import session_factory

router = APIRouter(prefix="/runs", tags=["runs"])
Filters = Annotated[RunFilters, Depends(run_filters)]


RUN_OUT_COLUMNS = [Run.__table__.c[name] for name in RunOut.model_fields]


@router.get("", response_model=Page[RunOut])
def list_runs(
    request: Request,
    db: DbSession,
    user: CurrentUser,
    filters: Filters,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> Response:
    """Runs you can see, filtered, sorted and paginated; `total` counts every page."""
    order = filters.order_by()  # a bad sort is refused before anything runs

    # Whole pages are cached by the CachedReads middleware; the total is cached here too, per
    # filter, so that paging through one result set counts it once.
    cache = request.app.state.read_cache
    matching = tuple(
        item for item in request.query_params.multi_items() if item[0] not in ("limit", "offset")
    )

    def count() -> int:
        return db.scalar(filtered_runs(db, user, filters, func.count(Run.id))) or 0

    total = cache.answer(db, ("runs.count", matching, user.id), count)
    # Sort and page narrow rows (ids), then load only the page's rows: the database then never
    # drags every run's JSON columns through the sort.
    page_ids = list(
        db.scalars(
            filtered_runs(db, user, filters, Run.id).order_by(*order).limit(limit).offset(offset)
        )
    )
    rows = db.execute(select(*RUN_OUT_COLUMNS).where(Run.id.in_(page_ids))).mappings()
    by_id = {row["id"]: row for row in rows}
    items = [RunOut.model_validate(by_id[run_id]) for run_id in page_ids]
    answer = Page[RunOut](total=total, limit=limit, offset=offset, items=items)
    return Response(answer.model_dump_json().encode(), media_type="application/json")


@router.get("/compare", response_model=list[Comparison])
def compare(
    db: DbSession,
    user: CurrentUser,
    ids: Annotated[list[int], Query(min_length=1, max_length=1000, description="run ids")],
) -> list[Comparison]:
    """Speedup, energy ratio and accuracy change of each run against its baseline."""
    baseline = aliased(Run)
    rows = db.execute(
        select(Run, baseline)
        .join(Experiment, Experiment.id == Run.experiment_id)
        .outerjoin(baseline, baseline.id == Run.baseline_run_id)
        .where(Run.id.in_(ids), visible_to(user, db))
        .order_by(Run.id)
    ).all()
    found = {run.id for run, _ in rows}
    missing = sorted(set(ids) - found)
    if missing:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"runs not found: {missing}")
    out = []
    for run, base in rows:
        reference = run if run.is_baseline else base
        delta = None
        if reference is not None and run.accuracy is not None and reference.accuracy is not None:
            delta = run.accuracy - reference.accuracy
        out.append(
            Comparison(
                run_id=run.id,
                baseline_run_id=reference.id if reference is not None else None,
                technique=run.technique,
                accelerator_name=run.accelerator_name,
                speedup=run.speedup,
                energy_ratio=run.energy_ratio,
                accuracy=run.accuracy,
                baseline_accuracy=reference.accuracy if reference is not None else None,
                accuracy_delta=delta,
            )
        )
    return out


@router.get("/groups", response_model=list[RunGroup])
def groups(db: DbSession, user: CurrentUser, filters: Filters) -> list[RunGroup]:
    """Runs you can see, filtered, grouped by everything but the seed: per group the mean and
    95% Student-t interval over seeds of accuracy, accuracy delta to the same seed's baseline,
    speedup and energy ratio."""
    filters.order_by()  # a bad sort is refused like everywhere else
    return run_groups(db, user, filters)


@router.get("/pareto", response_model=list[ParetoPoint])
def pareto(db: DbSession, user: CurrentUser, filters: Filters) -> list[ParetoPoint]:
    """Finished runs with their place on the speedup / accuracy-drop (/ energy) Pareto fronts."""
    baseline = aliased(Run)
    # A baseline run is its own reference: speedup 1, accuracy drop 0.
    reference_accuracy = case((Run.is_baseline, Run.accuracy), else_=baseline.accuracy)
    query = (
        filtered_runs(db, user, filters)
        .add_columns(reference_accuracy)
        .outerjoin(baseline, baseline.id == Run.baseline_run_id)
        .where(
            Run.status == "done",
            Run.speedup.is_not(None),
            Run.accuracy.is_not(None),
            Run.energy_pj.is_not(None),
            reference_accuracy.is_not(None),
        )
    )
    rows = db.execute(query.order_by(Run.id)).all()
    speedups = [run.speedup for run, _ in rows]
    drops = [base_acc - run.accuracy for run, base_acc in rows]
    energies = [run.energy_pj for run, _ in rows]
    front2 = front_2d([-s for s in speedups], drops)
    front3 = front_3d([-s for s in speedups], drops, energies)
    return [
        ParetoPoint(
            run_id=run.id,
            technique=run.technique,
            accelerator_name=run.accelerator_name,
            speedup=speedups[i],
            accuracy_drop=drops[i],
            energy_pj=energies[i],
            on_front_2d=front2[i],
            on_front_3d=front3[i],
        )
        for i, (run, _) in enumerate(rows)
    ]


EXPORT_COLUMNS = [
    "id", "experiment_id", "technique", "model", "dataset", "accelerator_name", "seed",
    "is_baseline", "status", "created_at", "started_at", "finished_at", "duration_seconds",
    "accuracy", "loss", "did_not_learn", "speedup", "energy_ratio", "total_cycles",
    "compute_cycles", "stall_cycles", "energy_pj", "macs_algorithmic", "macs_actual",
    "macs_skipped", "macs_overhead", "dram_bytes", "group", "params",
]  # fmt: skip


def export_row(run: Run) -> dict[str, Any]:
    row = {name: getattr(run, name, None) for name in EXPORT_COLUMNS}
    row["group"] = run_group_key(run)
    row["duration_seconds"] = (
        (run.finished_at - run.started_at).total_seconds()
        if run.finished_at and run.started_at
        else None
    )
    for name in ("created_at", "started_at", "finished_at"):
        row[name] = row[name].isoformat() if row[name] else None
    return row


@router.get("/export", response_class=StreamingResponse)
def export(
    request: Request,
    db: DbSession,
    user: CurrentUser,
    filters: Filters,
    format: Annotated[Literal["csv", "json"], Query(description="csv or json")] = "csv",
) -> StreamingResponse:
    """Every run matching the filters, streamed, with times, duration and swept params."""
    query = filtered_runs(db, user, filters).order_by(*filters.order_by())
    database_url = request.app.state.settings.effective_database_url

    def rows() -> Iterator[dict[str, Any]]:
        with session_factory(database_url)() as session:
            for run in session.scalars(query.execution_options(yield_per=500)):
                yield export_row(run)

    def as_csv() -> Iterator[str]:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, EXPORT_COLUMNS)
        writer.writeheader()
        for count, row in enumerate(rows(), 1):
            writer.writerow({**row, "params": json.dumps(row["params"], sort_keys=True)})
            if count % 500 == 0:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
        yield buffer.getvalue()

    def as_json() -> Iterator[str]:
        yield "["
        for count, row in enumerate(rows()):
            yield ("," if count else "") + json.dumps(row)
        yield "]"

    media = "text/csv" if format == "csv" else "application/json"
    return StreamingResponse(
        as_csv() if format == "csv" else as_json(),
        media_type=media,
        headers={"Content-Disposition": f'attachment; filename="orrery-runs.{format}"'},
    )


@router.get("/{run_id}", response_model=RunDetail)
def show_run(run_id: int, db: DbSession, user: CurrentUser) -> RunDetail:
    """One run with its per-layer-per-pass results and its training's per-epoch metrics."""
    run = db.scalar(
        select(Run)
        .join(Experiment, Experiment.id == Run.experiment_id)
        .where(Run.id == run_id, visible_to(user, db))
        .options(selectinload(Run.layers))
    )
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} not found")
    epochs = (
        list(
            db.scalars(
                select(EpochMetric)
                .where(EpochMetric.training_id == run.training_id)
                .order_by(EpochMetric.epoch)
            )
        )
        if run.training_id
        else []
    )
    detail = RunDetail.model_validate(
        {
            **RunOut.model_validate(run).model_dump(),
            "technique_params": run.technique_params,
            "training_config": run.training_config,
            "accelerator_config": run.accelerator_config,
            "summary": run.summary,
            "layers": [LayerOut.model_validate(layer) for layer in run.layers],
            "epochs": [EpochOut.model_validate(epoch) for epoch in epochs],
            "hit_rate_per_layer": hit_rate_per_layer(epochs),
        }
    )
    return detail


def hit_rate_per_layer(epochs: list[EpochMetric]) -> dict[str, list[float | None]]:
    """Each layer MERCURY looked at, with its hit rate in every epoch (None where it was off)."""
    layers = [
        name
        for name in dict.fromkeys(name for epoch in epochs for name in epoch.per_layer)
        if any("reuse_on" in epoch.per_layer.get(name, {}) for epoch in epochs)
    ]
    return {
        name: [epoch.per_layer.get(name, {}).get("hit_rate") for epoch in epochs] for name in layers
    }
