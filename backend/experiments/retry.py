"""Retrying a failed or cancelled run as a new attempt, its earlier attempts kept.

A retry records how the run's current attempt ended (`RunAttempt`: number, status, reason,
start and end, the worker of its training's last claim), puts the run back to `queued` under the
next attempt number, and has its training delivered again. What that takes depends on the
training, which other runs (other accelerators of the sweep) may share:
- failed or cancelled: back to `queued`, sent again by task name. The retry adds one to the
  training's fencing token, so a delivery of the old attempt that is still winding down can
  write nothing, and its delivery limit counts afresh from there;
- queued or running (a sibling run's retry came first, or the training went on for others
  while this run was cancelled): the run joins it, as a delivery stores results for every
  open run of its training; nothing is sent;
- done: sent again; the worker then simulates the stored workload on this run's accelerator,
  without training anew.

Only the run asked for re-runs. Siblings that failed with it stay failed, and its baseline is
left alone: a baseline that did not finish is retried on its own, and speedups are computed for
every finished run of the experiment whose baseline is done, whichever finishes last.

Race-safe without row locks (so on SQLite too): the run changes by an UPDATE conditional on the
status and attempt read, so of two concurrent retries of one run exactly one takes effect (the
other is refused: the run is queued again); the training changes by an UPDATE conditional on
its status, so of two retries of runs sharing a failed training one re-queues and sends it.
A retry racing the run's (or its experiment's) deletion either comes first, and the deletion is
refused since the run is queued again (deletion locks the runs before it looks at them), or
comes second and finds the run gone: `RunGone`, answered 404.
"""

from __future__ import annotations

import logging

from celery import Celery
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from backend.db.models import Run, RunAttempt, Training
from backend.delivery.send import BrokerUnavailable, enqueue_trainings
from backend.experiments.service import refresh_experiment_status

log = logging.getLogger("orrery.retry")
RETRYABLE = ("failed", "cancelled")


class RetryRefused(Exception):
    """The run cannot be retried now; the message says why."""


class RunGone(LookupError):
    """The run was deleted while it was being retried."""

    def __init__(self, run_id: int) -> None:
        super().__init__(f"run {run_id} not found: it was deleted meanwhile")


def attempt_history(db: Session, run_id: int) -> list[RunAttempt]:
    return list(
        db.scalars(select(RunAttempt).where(RunAttempt.run_id == run_id).order_by(RunAttempt.id))
    )


def retry_run(db: Session, celery: Celery, run: Run, retried_by: int | None) -> bool:
    """Start the run's next attempt; True when its training was sent to the queue now (False:
    it joined a delivery already under way, or the broker was unreachable and the reconciler
    sends the queued training when it is back)."""
    if run.status not in RETRYABLE:
        raise RetryRefused(
            f"run {run.id} is {run.status} (attempt {run.attempt}): only a failed or cancelled "
            "run can be retried"
        )
    if run.training_id is None:
        raise RetryRefused(f"run {run.id} has no training left to run")
    training = db.get(Training, run.training_id)
    if training is None:
        if db.scalar(select(Run.id).where(Run.id == run.id)) is None:
            raise RunGone(run.id)
        raise RetryRefused(f"run {run.id} has no training left to run")
    finished = RunAttempt.ending(run, worker=training.leased_by, retried_by=retried_by)
    restarted = db.execute(
        update(Run)
        .where(Run.id == run.id, Run.status == run.status, Run.attempt == run.attempt)
        .values(
            status="queued",
            attempt=Run.attempt + 1,
            error=None,
            progress=0.0,
            started_at=None,
            finished_at=None,
        )
        .execution_options(synchronize_session=False)
    ).rowcount
    if not restarted:
        run_id = run.id
        db.rollback()
        if db.scalar(select(Run.id).where(Run.id == run_id)) is None:
            raise RunGone(run_id)
        raise RetryRefused(f"run {run_id} was retried meanwhile: its next attempt is under way")
    db.add(finished)
    requeued = db.execute(
        update(Training)
        .where(Training.id == training.id, Training.status.in_(RETRYABLE))
        .values(
            status="queued",
            attempts=Training.attempts + 1,
            attempts_at_retry=Training.attempts + 1,
            cancel_requested=False,
            error=None,
            progress=0.0,
            heartbeat_at=None,
            finished_at=None,
        )
        .execution_options(synchronize_session=False)
    ).rowcount
    refresh_experiment_status(db, run.experiment_id)
    db.flush()
    db.refresh(training)
    if not requeued and training.status != "done":
        db.commit()
        return False
    try:
        enqueue_trainings(db, celery, [training])
    except BrokerUnavailable as exc:  # committed: the reconciler sends queued trainings
        log.warning("run %s: retry recorded, training %s not sent: %s", run.id, training.id, exc)
        return False
    return True
