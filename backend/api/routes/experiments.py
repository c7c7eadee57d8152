"""Experiments: submit, preview, list, show, cancel, and a server-sent event stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response, StreamingResponse
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.api.access import (
    DeletableExperiment,
    EditableExperiment,
    VisibleExperiment,
    can_see_experiment,
    require_team_editor,
    visible_to,
)
from backend.api.deps import CeleryDep, DbSession, SettingsDep
from backend.api.schemas import (
    AnnotationsIn,
    ExpansionPreview,
    ExperimentOut,
    Page,
    from_row,
)
from backend.api.security import CurrentUser, caller_now
from backend.db.models import Experiment, Run, Training
from backend.db.session import session_factory
from backend.experiments import deletion, service
from backend.experiments.expand import Expansion, expand
from backend.experiments.progress import OPEN, experiment_progress, trainings_progress
from backend.experiments.quota import (
    check_active_runs,
    check_active_searches,
    check_queued_trainings,
)
from backend.searches.records import check_searchable
from backend.settings import Settings
from backend.specs.experiment import ExperimentSpec
from backend.specs.techniques import BASELINE
from backend.specs.training import dataset_folder

router = APIRouter(prefix="/experiments", tags=["experiments"])


def _expand_checked(spec: ExperimentSpec, settings: Settings) -> Expansion:
    """The spec's expansion (an `ExpansionError` is the app's 422), its dataset paths checked."""
    expansion = expand(spec, settings.max_runs_per_experiment)
    _check_dataset_paths(spec, expansion, settings.effective_data_root)
    return expansion


def _check_dataset_paths(spec: ExperimentSpec, expansion: Expansion, data_root: Path) -> None:
    """Every training's dataset_path (as given, or as a sweep sets it) inside the data root."""
    for plan in expansion.trainings.values():
        path = plan.training_config.get("dataset_path")
        if path is None:
            continue
        try:
            dataset_folder(path, data_root)
        except ValueError as exc:
            swept = spec.sweep is not None and "training.dataset_path" in spec.sweep.parameters
            loc = (
                ("body", "sweep", "parameters", "training.dataset_path")
                if swept
                else ("body", "training", "dataset_path")
            )
            raise RequestValidationError(
                [{"loc": loc, "msg": str(exc), "type": "value_error"}]
            ) from exc


def _out(experiment: Experiment, counts: dict[str, int], trainings: int = 0) -> ExperimentOut:
    return from_row(ExperimentOut, experiment, run_counts=counts, trainings=trainings)


@router.post("/preview", response_model=ExpansionPreview)
def preview(spec: ExperimentSpec, settings: SettingsDep, user: CurrentUser) -> ExpansionPreview:
    """How many runs and trainings a spec expands to, without submitting it."""
    expansion = _expand_checked(spec, settings)
    baselines = sum(1 for r in expansion.runs if r.params["technique"] == BASELINE)
    return ExpansionPreview(
        runs=len(expansion.runs), trainings=len(expansion.trainings), baseline_runs=baselines
    )


@router.post("", response_model=ExperimentOut, status_code=status.HTTP_201_CREATED)
def create_experiment(
    spec: ExperimentSpec,
    db: DbSession,
    celery: CeleryDep,
    settings: SettingsDep,
    user: CurrentUser,
) -> ExperimentOut:
    """Expand the spec into runs (a baseline for each training config and seed), store them,
    and queue one training task per distinct training; a `search` starts once they are done
    (`GET /experiments/{id}/searches`)."""
    require_team_editor(db, user, spec.team_id)
    if spec.search is not None:
        check_searchable(spec)
    expansion = _expand_checked(spec, settings)
    check_active_runs(db, user, len(expansion.runs), settings.max_active_runs_per_user)
    check_queued_trainings(
        db, user, len(expansion.trainings), settings.max_queued_trainings_per_user
    )
    if spec.search is not None:
        check_active_searches(db, user, settings.max_active_searches_per_user)
    experiment = service.submit(
        db, celery, spec, expansion, owner_id=user.id, dispatch_ahead=settings.dispatch_ahead
    )
    counts = service.run_counts(db, [experiment.id])[experiment.id]
    return _out(experiment, counts, trainings=len(expansion.trainings))


@router.get("", response_model=Page[ExperimentOut])
def list_experiments(
    db: DbSession,
    user: CurrentUser,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> Page[ExperimentOut]:
    """Your experiments and your teams', newest first."""
    query = select(Experiment).where(visible_to(user, db))
    total = db.scalar(select(func.count()).select_from(query.subquery())) or 0
    experiments = list(
        db.scalars(
            query.order_by(Experiment.created_at.desc(), Experiment.id.desc())
            .limit(limit)
            .offset(offset)
        )
    )
    counts = service.run_counts(db, [e.id for e in experiments])
    return Page(
        total=total,
        limit=limit,
        offset=offset,
        items=[_out(e, counts[e.id]) for e in experiments],
    )


@router.get("/{experiment_id}", response_model=ExperimentOut)
def show_experiment(experiment: VisibleExperiment, db: DbSession) -> ExperimentOut:
    return _detail(db, experiment)


def _detail(db: Session, experiment: Experiment) -> ExperimentOut:
    """The experiment with its run counts, its number of trainings and its progress."""
    trainings = db.scalar(
        select(func.count()).select_from(Training).where(Training.experiment_id == experiment.id)
    )
    return from_row(
        ExperimentOut,
        experiment,
        run_counts=service.run_counts(db, [experiment.id])[experiment.id],
        trainings=trainings or 0,
        progress=experiment_progress(db, experiment.id),
    )


@router.patch("/{experiment_id}", response_model=ExperimentOut)
def annotate(
    experiment: EditableExperiment, annotations: AnnotationsIn, db: DbSession
) -> ExperimentOut:
    """Set an experiment's tags or notes (its owner and its team's owners and members)."""
    for field, value in annotations.model_dump(exclude_none=True).items():
        setattr(experiment, field, value)
    db.commit()
    return _detail(db, experiment)


@router.delete(
    "/{experiment_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={403: {"description": "not the owner"}, 409: {"description": "runs still active"}},
)
def delete_experiment(experiment: DeletableExperiment, db: DbSession) -> Response:
    """Delete an experiment with its runs, trainings and results (its owner only; refused
    while any run is queued or running)."""
    deletion.delete_experiment(db, experiment)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{experiment_id}/cancel", response_model=ExperimentOut)
def cancel(experiment: EditableExperiment, db: DbSession) -> ExperimentOut:
    """Cancel every open run at once, stranded ones included; a worker still training one
    stops at its next batch and can store nothing."""
    service.cancel_experiment(db, experiment)
    db.refresh(experiment)
    return _out(experiment, service.run_counts(db, [experiment.id])[experiment.id])


RunState = dict[str, Any]


def _run_states(db: Session, experiment_id: int) -> dict[int, RunState]:
    """Each run's status and progress, and while it is open its training's epoch, epochs and
    time left (whole seconds)."""
    rows = db.execute(
        select(Run.id, Run.status, Run.progress, Run.training_id).where(
            Run.experiment_id == experiment_id
        )
    ).all()
    trainings = trainings_progress(db, list({r.training_id for r in rows if r.status in OPEN}))
    states = {}
    for row in rows:
        state: RunState = {"id": row.id, "status": row.status, "progress": row.progress}
        training = trainings.get(row.training_id) if row.status in OPEN else None
        if training is not None:
            left = training.seconds_left
            state |= {
                "epoch": training.epoch,
                "epochs": training.epochs,
                "seconds_left": None if left is None else round(left),
            }
        states[row.id] = state
    return states


def _snapshot(
    database_url: str, experiment_id: int, request: Request, user_id: int
) -> tuple[str, dict[int, RunState], dict[str, Any]] | None:
    """The experiment's status, its runs' states and its progress, or None once the caller
    may no longer see it (credentials revoked, removed from the team, account deactivated)."""
    with session_factory(database_url)() as db:
        caller = caller_now(request, db)
        if caller is None or caller.id != user_id:
            return None
        exists = db.scalar(select(Experiment.id).where(Experiment.id == experiment_id))
        if exists is not None and not can_see_experiment(db, caller, experiment_id):
            return None
        experiment_status = db.scalar(
            select(Experiment.status).where(Experiment.id == experiment_id)
        )
        progress = experiment_progress(db, experiment_id)
        left = progress.seconds_left
        summary = {
            "id": experiment_id,
            "fraction": progress.fraction,
            "running": progress.running,
            "seconds_left": None if left is None else round(left),
        }
        return experiment_status or "deleted", _run_states(db, experiment_id), summary


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


@router.get(
    "/{experiment_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def events(
    experiment: VisibleExperiment,
    request: Request,
    db: DbSession,
    user: CurrentUser,
    interval: Annotated[float, Query(ge=0.2, le=30, description="seconds between polls")] = 1.0,
) -> StreamingResponse:
    """Server-sent events: `run` when a run's status, progress, epoch or time left changes,
    `experiment` when the experiment's status changes, `progress` when its fraction done or time
    left does, `end` once every run has finished. Access is checked again
    at every poll: once the caller may no longer see the experiment, a `denied` event ends
    the stream."""

    # The stream polls with sessions of its own: hold no connection while it runs.
    experiment_id = experiment.id
    await run_in_threadpool(db.close)
    database_url = request.app.state.settings.effective_database_url

    async def stream() -> AsyncIterator[str]:
        seen: dict[int, RunState] = {}
        last_status, last_progress = None, None
        while not await request.is_disconnected():
            snapshot = await run_in_threadpool(
                _snapshot, database_url, experiment_id, request, user.id
            )
            if snapshot is None:
                yield _event("denied", {"id": experiment_id, "detail": "access was lost"})
                return
            experiment_status, runs, progress = snapshot
            for run_id, state in runs.items():
                if seen.get(run_id) != state:
                    yield _event("run", state)
            seen = runs
            if progress != last_progress:
                yield _event("progress", progress)
                last_progress = progress
            if experiment_status != last_status:
                yield _event("experiment", {"id": experiment_id, "status": experiment_status})
                last_status = experiment_status
            if experiment_status in (*service.TERMINAL, "deleted"):
                yield _event("end", {"id": experiment_id, "status": experiment_status})
                return
            await asyncio.sleep(interval)

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )
