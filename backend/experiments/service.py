"""Recording experiments and their runs, submitting them, cancelling, and status roll-up.

Used by the API (create, cancel) and by the worker (status roll-up). No web or Celery types here
except the Celery app handed in to send tasks by name (`backend.delivery.send`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from celery import Celery
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from backend.db.models import Experiment, Run, Training
from backend.delivery.dispatch import dispatch
from backend.delivery.send import BrokerUnavailable
from backend.experiments.expand import Expansion, RunPlan, training_key
from backend.searches.records import cancel_experiment_searches, record_search
from backend.settings import Settings
from backend.specs.experiment import ExperimentSpec
from backend.specs.techniques import BASELINE

TERMINAL = ("done", "failed", "cancelled")


def record_experiment(
    db: Session, spec: ExperimentSpec, expansion: Expansion, owner_id: int | None
) -> Experiment:
    """Insert the experiment, its trainings and runs (status queued), linking baselines."""
    experiment = Experiment(
        owner_id=owner_id,
        team_id=spec.team_id,
        name=spec.name,
        spec=spec.model_dump(mode="json"),
        status="queued",
    )
    db.add(experiment)
    db.flush()
    trainings: dict[str, Training] = {}
    for plan in expansion.trainings.values():
        training = Training(
            experiment_id=experiment.id,
            key=plan.key,
            technique=plan.technique,
            technique_params=plan.technique_params,
            training_config=plan.training_config,
            status="queued",
        )
        db.add(training)
        trainings[plan.key] = training
    db.flush()

    runs: list[tuple[Run, RunPlan]] = []
    for plan in expansion.runs:
        run = Run.for_training(
            trainings[plan.training_key],
            is_baseline=expansion.trainings[plan.training_key].is_baseline,
            accelerator_name=plan.accelerator_name,
            accelerator_config=plan.accelerator_config,
            params=plan.params,
            baseline_hardware=plan.baseline_hardware,
            group_key=plan.group_key,
        )
        db.add(run)
        runs.append((run, plan))
    db.flush()
    if spec.search is not None:
        record_search(db, experiment.id, spec.search, owner_id)

    baseline_members = [{"name": BASELINE}]
    baselines = {
        (plan.training_key, plan.accelerator_key, plan.baseline_hardware): run
        for run, plan in runs
        if expansion.trainings[plan.training_key].is_baseline
    }
    for run, plan in runs:
        if not run.is_baseline:
            config = expansion.trainings[plan.training_key].training_config
            baseline_key = training_key(config, baseline_members)
            reference = (baseline_key, plan.accelerator_key, plan.baseline_hardware)
            run.baseline_run_id = baselines[reference].id
    return experiment


def submit(
    db: Session,
    celery: Celery,
    spec: ExperimentSpec,
    expansion: Expansion,
    owner_id: int | None,
    dispatch_ahead: int = Settings.model_fields["dispatch_ahead"].default,
) -> Experiment:
    """Record an experiment with its trainings queued, then dispatch fairly
    (`backend.delivery.dispatch`: its trainings are sent when their turn comes, perhaps now);
    on a broker refusing a send remove the experiment again and raise."""
    experiment = record_experiment(db, spec, expansion, owner_id)
    try:
        dispatch(db, celery, dispatch_ahead)
    except BrokerUnavailable:
        db.rollback()
        db.execute(delete(Experiment).where(Experiment.id == experiment.id))  # cascades in SQL
        db.commit()
        raise
    return experiment


def run_counts(db: Session, experiment_ids: list[int]) -> dict[int, dict[str, int]]:
    rows = db.execute(
        select(Run.experiment_id, Run.status, func.count())
        .where(Run.experiment_id.in_(experiment_ids))
        .group_by(Run.experiment_id, Run.status)
    )
    counts: dict[int, dict[str, int]] = {i: {} for i in experiment_ids}
    for experiment_id, status, count in rows:
        counts[experiment_id][status] = count
    return counts


def refresh_experiment_status(db: Session, experiment_id: int) -> str:
    """Roll the runs' statuses up into the experiment's."""
    counts = run_counts(db, [experiment_id])[experiment_id]
    total = sum(counts.values())
    if counts.get("queued", 0) + counts.get("running", 0) > 0:
        status = "running" if counts.get("running", 0) or counts.get("done", 0) else "queued"
    elif total and counts.get("done", 0) == total:
        status = "done"
    elif counts.get("failed", 0):
        status = "failed"
    else:
        status = "cancelled"
    values: dict[str, Any] = {
        "status": status,
        "finished_at": datetime.now(UTC) if status in TERMINAL else None,  # None: retried
    }
    db.execute(update(Experiment).where(Experiment.id == experiment_id).values(**values))
    return status


def _cancel_trainings(trainings: list[Training]) -> None:
    """Cancel trainings now, whatever their state: a worker still training one loses its
    lease (its writes are fenced) and stops at its next batch; a stranded one is simply over;
    a task still in the broker finds nothing to claim. (No broker revoke: with the broker
    away it would hold the request up, and the database is what workers obey.)"""
    now = datetime.now(UTC)
    for training in trainings:
        training.cancel_requested = True
        training.status = "cancelled"
        training.finished_at = now
        training.heartbeat_at = None


def cancel_experiment(db: Session, experiment: Experiment) -> None:
    """Cancel every open run and training of the experiment at once, stranded ones included,
    and its design searches still waiting or running."""
    trainings = list(
        db.scalars(
            select(Training).where(
                Training.experiment_id == experiment.id, Training.status.not_in(TERMINAL)
            )
        )
    )
    db.execute(
        update(Run)
        .where(Run.experiment_id == experiment.id, Run.status.not_in(TERMINAL))
        .values(status="cancelled", finished_at=datetime.now(UTC))
    )
    _cancel_trainings(trainings)
    cancel_experiment_searches(db, experiment.id)
    refresh_experiment_status(db, experiment.id)
    db.commit()


def cancel_run(db: Session, run: Run) -> None:
    """Cancel one open run; its training too when no other open run shares it."""
    if run.status in TERMINAL:
        return
    run.status = "cancelled"
    run.finished_at = datetime.now(UTC)
    db.flush()
    if run.training_id is not None:
        others = db.scalar(
            select(func.count())
            .select_from(Run)
            .where(Run.training_id == run.training_id, Run.status.not_in(TERMINAL))
        )
        training = db.get(Training, run.training_id)
        if not others and training is not None and training.status not in TERMINAL:
            _cancel_trainings([training])
    refresh_experiment_status(db, run.experiment_id)
    db.commit()
