"""Deleting a run or a whole experiment, with what belongs only to it, and nothing else.

Refused while anything it deletes is queued or running (cancel first), and, for a run, while
it is the baseline of another run (their speedups would lose their reference). The runs are
locked (SELECT ... FOR UPDATE, on PostgreSQL) before their status is read, so a retry that
re-queues one meanwhile either comes first (the deletion then sees it queued and is refused) or
waits for the deletion and finds the run gone. A run's
training (its epochs and stored workload) goes with it when no other run shares it. Rows are
deleted explicitly, children first, so SQLite without foreign-key enforcement ends in the same
state as PostgreSQL.
"""

from __future__ import annotations

from sqlalchemy import delete, exists, func, select
from sqlalchemy.orm import Session

from backend.db.models import (
    DesignSearchRow,
    EpochMetric,
    Experiment,
    LayerResult,
    Run,
    SearchChunk,
    Training,
)
from backend.searches.records import SEARCH_ACTIVE

ACTIVE = ("queued", "running")


class DeletionRefused(ValueError):
    """The deletion would strand work or another run's reference; the message says which."""


def delete_run(db: Session, run: Run) -> None:
    status = db.scalar(select(Run.status).where(Run.id == run.id).with_for_update())
    if status is None:  # deleted meanwhile: nothing left to do
        db.commit()
        return
    if status in ACTIVE:
        raise DeletionRefused(f"run {run.id} is {status}: cancel it first")
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
    statuses = db.scalars(
        select(Run.status)
        .where(Run.experiment_id == experiment.id)
        .order_by(Run.id)
        .with_for_update()
    )
    active = sum(status in ACTIVE for status in statuses)
    if active:
        raise DeletionRefused(
            f"experiment {experiment.id} has {active} queued or running run(s): cancel it first"
        )
    searching = db.scalar(
        select(func.count()).where(
            DesignSearchRow.experiment_id == experiment.id,
            DesignSearchRow.status.in_(SEARCH_ACTIVE),
        )
    )
    if searching:
        raise DeletionRefused(
            f"experiment {experiment.id} has {searching} design search(es) under way: cancel "
            "it first"
        )
    runs = select(Run.id).where(Run.experiment_id == experiment.id)
    trainings = select(Training.id).where(Training.experiment_id == experiment.id)
    db.execute(delete(LayerResult).where(LayerResult.run_id.in_(runs)))
    db.execute(delete(EpochMetric).where(EpochMetric.training_id.in_(trainings)))
    db.execute(delete(Run).where(Run.experiment_id == experiment.id))
    db.execute(delete(Training).where(Training.experiment_id == experiment.id))
    searches = select(DesignSearchRow.id).where(DesignSearchRow.experiment_id == experiment.id)
    db.execute(delete(SearchChunk).where(SearchChunk.search_id.in_(searches)))
    db.execute(delete(DesignSearchRow).where(DesignSearchRow.experiment_id == experiment.id))
    db.execute(delete(Experiment).where(Experiment.id == experiment.id))
    db.commit()
