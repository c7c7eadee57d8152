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
from sqlalchemy import Select, case, func, select
from sqlalchemy.orm import Session, aliased

from backend.analysis.group_summary import GroupSummary, summarise_groups
from backend.api.access import (
    DeletableRun,
    EditableRun,
    VisibleRun,
    VisibleRuns,
    can_see_workers,
)
from backend.api.cached_reads import cached_part, cached_read
from backend.api.deps import CeleryDep, DbSession, SettingsDep
from backend.api.run_columns import COLUMNS, extra_values
from backend.api.run_export import (
    EXPORT_COLUMNS,
    SOURCE_COLUMNS,
    csv_row,
    nested_row,
)
from backend.api.run_groups import run_groups
from backend.api.run_query import RunFilters, filtered_runs, run_filters
from backend.api.schemas import (
    AnnotationsIn,
    Comparison,
    EpochOut,
    LayerOut,
    Page,
    ParetoPoint,
    ProgressOut,
    RunAttemptOut,
    RunColumnOut,
    RunDetail,
    RunGroup,
    RunOut,
    RunRow,
)
from backend.api.security import CurrentUser
from backend.db.change_log import PROGRESS
from backend.db.models import EpochMetric, Run, Training
from backend.db.session import session_factory
from backend.experiments import deletion
from backend.experiments.progress import OPEN, trainings_progress
from backend.experiments.quota import check_owner_active_runs
from backend.experiments.retry import RunGone, attempt_history, retry_run
from backend.experiments.service import cancel_run as cancel_open_run
from backend.sim.pareto import front_2d, front_3d
from backend.specs.figures import SUMMARISED
from backend.specs.techniques import EPOCH_FIGURES

router = APIRouter(prefix="/runs", tags=["runs"])
Filters = Annotated[RunFilters, Depends(run_filters)]
# What the runs a caller may see read (access.py's `visible_to`, filtered): the change topics
# of the cached reads of them, besides the caller's own (api/cached_reads.py).
RUN_TABLES = ("experiments", "runs")


RUN_OUT_COLUMNS = [Run.__table__.c[name] for name in RunOut.model_fields]


@router.get("", response_model=Page[RunRow])
@cached_read(*RUN_TABLES, "epoch_metrics", PROGRESS)
def list_runs(
    request: Request,
    db: DbSession,
    user: CurrentUser,
    filters: Filters,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
    column: Annotated[
        list[str],
        Query(description="extra columns for each row's `columns` (keys of /runs/columns)"),
    ] = [],  # noqa: B006
) -> Response:
    """Runs you can see, filtered, sorted and paginated; `total` counts every page."""
    order = filters.order_by()  # a bad sort is refused before anything runs
    unknown = [key for key in column if key not in COLUMNS]
    if unknown:
        raise HTTPException(
            422, f"column: unknown column '{unknown[0]}'; GET /api/v1/runs/columns lists them"
        )

    # Whole pages are cached by the CachedReads middleware; the total is cached here too, per
    # filter, so that paging through one result set counts it once.
    matching = tuple(
        item for item in request.query_params.multi_items() if item[0] not in ("limit", "offset")
    )

    def count() -> int:
        return db.scalar(filtered_runs(db, user, filters, func.count(Run.id))) or 0

    total = cached_part(request, db, ("runs.count", matching, user.id), count)
    # Sort and page narrow rows (ids), then join only the page's rows to what they show, in one
    # statement: the database never drags every run's JSON columns through the sort.
    page = filtered_runs(db, user, filters, Run.id).order_by(*order).limit(limit).offset(offset)
    shown = page.subquery()
    joined = select(*RUN_OUT_COLUMNS).join(shown, shown.c.id == Run.id).order_by(*order)
    rows = list(db.execute(joined).mappings())
    extras = extra_values(db, [row["id"] for row in rows], column)
    items = [RunRow.model_validate({**row, "columns": extras[row["id"]]}) for row in rows]
    answer = Page[RunRow](total=total, limit=limit, offset=offset, items=items)
    return Response(answer.model_dump_json().encode(), media_type="application/json")


@router.get("/columns", response_model=list[RunColumnOut])
def columns(_user: CurrentUser) -> list[RunColumnOut]:
    """Every column the run list can show (`column=`), sort by (`sort=`, where `sortable`),
    filter by range (`range=`, the sortable numbers) and group by (`/runs/summary?by=`, where
    `groupable`): the run's fields and measures, derived figures, epoch figures over the
    training, and every training, accelerator and technique field."""
    return [RunColumnOut.model_validate(c) for c in COLUMNS.values()]


@router.get("/compare", response_model=list[Comparison])
@cached_read(*RUN_TABLES)
def compare(runs: VisibleRuns, db: DbSession) -> list[Comparison]:
    """Speedup, energy ratio and accuracy change of each run against its baseline."""
    baseline_ids = {run.baseline_run_id for run in runs if run.baseline_run_id is not None}
    baselines = {b.id: b for b in db.scalars(select(Run).where(Run.id.in_(baseline_ids)))}
    out = []
    for run in runs:
        base = baselines.get(run.baseline_run_id) if run.baseline_run_id is not None else None
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
@cached_read(*RUN_TABLES)
def groups(db: DbSession, user: CurrentUser, filters: Filters) -> list[RunGroup]:
    """Runs you can see, filtered, grouped by everything but the seed: per group the mean and
    95% Student-t interval over seeds of accuracy, accuracy delta to the same seed's baseline,
    speedup and energy ratio."""
    filters.order_by()  # a bad sort is refused like everywhere else
    return run_groups(db, user, filters)


@router.get("/pareto", response_model=list[ParetoPoint])
@cached_read(*RUN_TABLES)
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


def _export_runs(database_url: str, query: Select[Any]) -> Iterator[Any]:
    """The rows of the export, streamed from a server-side cursor (`yield_per`: PostgreSQL sends
    them 500 at a time, never the whole result at once), the first one already read: a query
    that fails, fails here, before anything is sent, and is answered with its status code like
    any other request."""
    session = session_factory(database_url)()
    try:
        runs = iter(session.execute(query.execution_options(yield_per=500)))
        first = next(runs, None)
    except BaseException:
        session.close()
        raise

    def all_runs() -> Iterator[Any]:
        try:
            if first is None:
                return  # an exhausted result is not asked again
            yield first
            yield from runs
        finally:
            session.close()

    return all_runs()


def _visibly_incomplete(chunks: Iterator[str], format: str) -> Iterator[str]:
    """An error once the answer has begun cannot change its status: the body says so (a CSV
    comment line, or text that makes the JSON invalid) and the connection is then aborted,
    so a cut-off export is never mistaken for a whole one."""
    try:
        yield from chunks
    except Exception as exc:
        reason = (
            f"export failed after the rows above ({type(exc).__name__}); this file is incomplete"
        )
        yield f"\n# {reason}\n" if format == "csv" else f"\nERROR: {reason}\n"
        raise


@router.get("/export", response_class=StreamingResponse)
@cached_read(*RUN_TABLES)
def export(
    request: Request,
    db: DbSession,
    user: CurrentUser,
    filters: Filters,
    format: Annotated[Literal["csv", "json"], Query(description="csv or json")] = "csv",
) -> StreamingResponse:
    """Every run matching the filters, streamed: times, duration, swept params, metrics, and
    the whole training config, accelerator config and technique settings (flat columns in CSV,
    nested in JSON).

    Filters are checked and the query started before the answer begins (a bad filter is 422
    like `/runs`); an error after that aborts the answer, its body saying it is incomplete."""
    first, *rest = SOURCE_COLUMNS
    query = filtered_runs(db, user, filters, first).add_columns(*rest)
    runs = _export_runs(
        request.app.state.settings.effective_database_url, query.order_by(*filters.order_by())
    )

    def as_csv() -> Iterator[str]:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(EXPORT_COLUMNS)
        for count, run in enumerate(runs, 1):
            writer.writerow(csv_row(run))
            if count % 500 == 0:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
        yield buffer.getvalue()

    def as_json() -> Iterator[str]:
        yield "["
        for count, run in enumerate(runs):
            yield ("," if count else "") + json.dumps(nested_row(run))
        yield "]"

    media = "text/csv" if format == "csv" else "application/json"
    return StreamingResponse(
        _visibly_incomplete(as_csv() if format == "csv" else as_json(), format),
        media_type=media,
        headers={"Content-Disposition": f'attachment; filename="orrery-runs.{format}"'},
    )


# The run table groups by up to three columns; more would split runs into groups of one.
MAX_GROUP_KEYS = 3


def _group_key(by: str) -> Any:
    if by.startswith("param:") and len(by) > len("param:"):
        return Run.params[by.removeprefix("param:")]
    if by in COLUMNS and COLUMNS[by].groupable:
        return COLUMNS[by].expression
    raise HTTPException(
        422,
        f"by: '{by}' is not a groupable column (GET /api/v1/runs/columns: groupable) "
        "or a swept value 'param:<path>'",
    )


@router.get("/summary", response_model=list[GroupSummary])
@cached_read(*RUN_TABLES)
def summary(
    db: DbSession,
    user: CurrentUser,
    filters: Filters,
    by: Annotated[
        list[str],
        Query(
            max_length=MAX_GROUP_KEYS,
            description=f"one to {MAX_GROUP_KEYS} groupable columns (technique, model, "
            "accelerator_name, training.batch_size, mercury.signature_bits, ...: /runs/columns) "
            "or swept values 'param:<path>'; several give one group per combination",
        ),
    ],
) -> list[GroupSummary]:
    """The matching runs grouped by one or more columns: per group the run count and, for each
    metric, how many runs have it (n) and their mean and sample standard deviation."""
    keys = [_group_key(item) for item in by]
    metrics = [COLUMNS[measure.key].expression for measure in SUMMARISED]
    query = filtered_runs(db, user, filters, keys[0]).add_columns(*keys[1:], *metrics)
    rows = db.execute(query).all()
    width = len(keys)
    grouped = ((row[0] if width == 1 else list(row[:width]), *row[width:]) for row in rows)
    return summarise_groups(grouped, [measure.key for measure in SUMMARISED])


@router.get("/{run_id}", response_model=RunDetail)
def show_run(run: VisibleRun, db: DbSession, user: CurrentUser) -> RunDetail:
    """One run with its per-layer-per-pass results and its training's per-epoch metrics; its
    attempts name their worker to those who may edit the run, and administrators."""
    attempts = [RunAttemptOut.model_validate(a) for a in attempt_history(db, run.id)]
    if not can_see_workers(db, user, run):
        attempts = [attempt.model_copy(update={"worker": None}) for attempt in attempts]
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
            "figures_per_layer": figures_per_layer(epochs),
            "attempts": attempts,
            "live": _live(db, run),
            "training_environment": (
                db.scalar(select(Training.environment).where(Training.id == run.training_id))
                if run.training_id
                else None
            ),
        }
    )
    return detail


@router.patch("/{run_id}", response_model=RunOut)
def annotate_run(run: EditableRun, annotations: AnnotationsIn, db: DbSession) -> RunOut:
    """Set a run's tags or notes (its experiment's owner and its team's owners and members)."""
    for field, value in annotations.model_dump(exclude_none=True).items():
        setattr(run, field, value)
    db.commit()
    return RunOut.model_validate(run)


@router.delete(
    "/{run_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={
        403: {"description": "not the owner"},
        409: {"description": "still active, or the baseline of other runs"},
    },
)
def delete_run(run: DeletableRun, db: DbSession) -> Response:
    """Delete one run with its results (its experiment's owner only; refused while it is queued
    or running, and while it is the baseline of other runs)."""
    deletion.delete_run(db, run)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _live(db: Session, run: Run) -> ProgressOut | None:
    """An open run's epoch, fraction and time left, from its training's."""
    if run.status not in OPEN or run.training_id is None:
        return None
    training = trainings_progress(db, [run.training_id])[run.training_id]
    return ProgressOut(
        fraction=run.progress,
        epoch=training.epoch,
        epochs=training.epochs,
        seconds_left=training.seconds_left,
    )


def figures_per_layer(epochs: list[EpochMetric]) -> dict[str, dict[str, list[float | None]]]:
    """Per declared epoch figure, each layer that measured it, with its value in every epoch
    (None in an epoch where it did not: e.g. MERCURY's reuse switched off)."""
    out: dict[str, dict[str, list[float | None]]] = {}
    for figure in EPOCH_FIGURES:
        layers = dict.fromkeys(
            name
            for epoch in epochs
            for name, values in epoch.per_layer.items()
            if figure.key in values
        )
        if layers:
            out[figure.key] = {
                name: [epoch.per_layer.get(name, {}).get(figure.key) for epoch in epochs]
                for name in layers
            }
    return out


@router.post("/{run_id}/cancel", response_model=RunOut)
def cancel_run(run: EditableRun, db: DbSession) -> RunOut:
    """Cancel one open run at once, stranded or not; its training stops too when no other
    open run shares it."""
    cancel_open_run(db, run)
    db.refresh(run)
    return RunOut.model_validate(run)


@router.post(
    "/{run_id}/retry",
    response_model=RunOut,
    responses={
        403: {"description": "a viewer of the run's team"},
        404: {"description": "not yours to see, or deleted meanwhile"},
        409: {"description": "not failed or cancelled (e.g. retried meanwhile)"},
        429: {"description": "over the owner's queued-plus-running limit"},
    },
)
def retry(
    run: EditableRun, db: DbSession, celery: CeleryDep, settings: SettingsDep, user: CurrentUser
) -> RunOut:
    """Re-run a failed or cancelled run as its next attempt (whoever may cancel it): the
    attempt that ended is kept in the run's `attempts`, and only this run re-runs (not its
    baseline, nor other runs sharing its training)."""
    if run.status in ("failed", "cancelled"):
        limit = settings.max_active_runs_per_user
        check_owner_active_runs(db, run.experiment.owner_id, user, 1, limit, what="this retry")
    run_id = run.id
    retry_run(db, celery, run, retried_by=user.id)
    # Read afresh: the run may have been deleted since the retry committed.
    retried = db.scalar(
        select(Run).where(Run.id == run_id).execution_options(populate_existing=True)
    )
    if retried is None:
        raise RunGone(run_id)
    return RunOut.model_validate(retried)
