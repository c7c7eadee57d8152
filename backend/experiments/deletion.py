"""Deleting a run or a whole experiment, with what belongs only to it, and nothing else.

Refused while anything it deletes is queued or running (cancel first), and, for a run, while
it is the baseline of another run (their speedups would lose their reference). A run's
training (its epochs and stored workload) goes with it when no other run shares it. Rows are
deleted explicitly, children first, so SQLite without foreign-key enforcement ends in the same
state as PostgreSQL.
"""

from __future__ import annotations

from sqlalchemy import delete, exists, func, select
from sqlalchemy.orm import Session

from backend.db.models import EpochMetric, Experiment, LayerResult, Run, Training

ACTIVE = ("queued", "running")


class DeletionRefused(ValueError):
    """The deletion would strand work or another run's reference; the message says which."""


def delete_run(db: Session, run: Run) -> None:
    if run.status in ACTIVE:
        raise DeletionRefused(f"run {run.id} is {run.status}: cancel it first")
    dependants = db.scalar(
        select(func.count()).where(Run.baseline_run_id == run.id, Run.id != run.id)
    )
    if dependants:
        raise DeletionRefused(
            f"run {run.id} is the baseline of {dependants} other run(s): delete those first"
        )
    training_id = run.training_id
    db.execute(delete(LayerResult).where(LayerResult.run_id == run.id))
    db.execute(delete(Run).where(Run.id == run.id))
    if training_id is not None:
        shared = db.scalar(select(exists().where(Run.training_id == training_id)))
        if not shared:
            db.execute(delete(EpochMetric).where(EpochMetric.training_id == training_id))
            db.execute(delete(Training).where(Training.id == training_id))
    db.commit()


def delete_experiment(db: Session, experiment: Experiment) -> None:
    active = db.scalar(
        select(func.count()).where(Run.experiment_id == experiment.id, Run.status.in_(ACTIVE))
    )
    if active:
        raise DeletionRefused(
            f"experiment {experiment.id} has {active} queued or running run(s): cancel it first"
        )
    runs = select(Run.id).where(Run.experiment_id == experiment.id)
    trainings = select(Training.id).where(Training.experiment_id == experiment.id)
    db.execute(delete(LayerResult).where(LayerResult.run_id.in_(runs)))
    db.execute(delete(EpochMetric).where(EpochMetric.training_id.in_(trainings)))
    db.execute(delete(Run).where(Run.experiment_id == experiment.id))
    db.execute(delete(Training).where(Training.experiment_id == experiment.id))
    db.execute(delete(Experiment).where(Experiment.id == experiment.id))
    db.commit()
