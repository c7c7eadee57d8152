"""How far a training, a run and an experiment have got, and the time they have left.

Model. A training writes the fraction of its batches done while it trains (`Training.progress`)
and stores each epoch as soon as it is measured, with the epoch's whole wall time
(`EpochMetric.wall_seconds`: batches, evaluation and figures). From these:
- a training is at epoch k of N: k epochs stored, N from its training config (resolved at
  expansion);
- its time left is the mean wall time of its stored epochs times the epochs still to train
  (N - fraction x N, the current epoch counted by the batches it has done); unknown (None)
  until its first epoch is measured;
- a run shows its training's epochs and time left, and its own fraction (the simulation after
  the training is the rest of a run's bar);
- an experiment's fraction is the mean over its runs (a finished run counts whole), as its
  progress bars show it; its time left is the work of its open trainings, running ones by their
  own estimate and queued ones at the mean epoch time measured in the experiment so far, divided
  among the trainings running now (at least one).

Open choices: queued trainings are costed at the experiment's mean epoch time although a
technique's epochs may be slower than a baseline's; the experiment's estimate assumes as many
trainings keep running at once as run now. Both are estimates, shown as "about".
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.db.models import EpochMetric, Run, Training

OPEN = ("queued", "running")


@dataclass(frozen=True)
class TrainingProgress:
    status: str
    fraction: float  # of its batches, 0..1
    epoch: int  # epochs measured and stored
    epochs: int | None  # epochs it trains
    epoch_seconds: float | None  # mean wall time of its stored epochs
    seconds_left: float | None


@dataclass(frozen=True)
class ExperimentProgress:
    fraction: float  # mean over its runs, a finished run counted whole
    running: int  # trainings running now
    seconds_left: float | None


def _left(epochs: int | None, fraction: float, epoch_seconds: float | None) -> float | None:
    if epochs is None or epoch_seconds is None:
        return None
    return max(epochs * (1.0 - fraction), 0.0) * epoch_seconds


def trainings_progress(db: Session, training_ids: list[int]) -> dict[int, TrainingProgress]:
    """Each training's epochs and time left (see the module docstring)."""
    if not training_ids:
        return {}
    stored = {
        training_id: (count, mean)
        for training_id, count, mean in db.execute(
            select(
                EpochMetric.training_id,
                func.count(),
                func.avg(func.coalesce(EpochMetric.wall_seconds, EpochMetric.seconds)),
            )
            .where(EpochMetric.training_id.in_(training_ids))
            .group_by(EpochMetric.training_id)
        )
    }
    out = {}
    for training_id, status, fraction, config in db.execute(
        select(Training.id, Training.status, Training.progress, Training.training_config).where(
            Training.id.in_(training_ids)
        )
    ):
        count, mean = stored.get(training_id, (0, None))
        epochs = (config or {}).get("epochs")
        fraction = 1.0 if status == "done" else float(fraction or 0.0)
        left = _left(epochs, fraction, mean) if status in OPEN else None
        out[training_id] = TrainingProgress(status, fraction, count, epochs, mean, left)
    return out


def experiment_progress(db: Session, experiment_id: int) -> ExperimentProgress:
    """The experiment's fraction done and its time left (see the module docstring)."""
    fractions = [
        1.0 if status not in OPEN else float(progress or 0.0)
        for status, progress in db.execute(
            select(Run.status, Run.progress).where(Run.experiment_id == experiment_id)
        )
    ]
    fraction = sum(fractions) / len(fractions) if fractions else 0.0
    ids = list(db.scalars(select(Training.id).where(Training.experiment_id == experiment_id)))
    trainings = trainings_progress(db, ids).values()
    measured = [t.epoch_seconds for t in trainings if t.epoch_seconds is not None]
    mean = sum(measured) / len(measured) if measured else None
    running = sum(t.status == "running" for t in trainings)
    open_ = [t for t in trainings if t.status in OPEN]
    if not open_:
        return ExperimentProgress(fraction, running, 0.0 if fractions else None)
    work = [
        t.seconds_left if t.seconds_left is not None else _left(t.epochs, t.fraction, mean)
        for t in open_
    ]
    if any(seconds is None for seconds in work):
        return ExperimentProgress(fraction, running, None)
    return ExperimentProgress(fraction, running, sum(work) / max(running, 1))  # type: ignore[arg-type]
