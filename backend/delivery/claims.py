"""Claiming a training and holding its lease: the delivery side of `backend.delivery.leases`.

A delivery (one Celery task run) holds a lease on its training and every write it makes is
fenced by the attempt number its claim took, so however often a training is delivered (a worker
died, was stopped past its lease, the broker redelivered, the reconciler re-sent a message that
was only slow) one delivery trains it at a time and one result set is stored:
- a training is *claimed* by a conditional status change: queued, or running with a heartbeat
  older than the lease, and only while it has deliveries left; a delivery that finds a live
  lease, or a finished training, leaves it alone, so a duplicate message is a no-op;
- while it trains, a heartbeat thread (`TrainingLease`) renews the lease; a renewal that finds
  the lease taken back stops the training at its next batch;
- a claim clears the epochs an earlier delivery stored (the new one trains from epoch 1);
- progress, epochs and the end of a delivery are written only while its attempt holds the
  lease;
  storing results under the same condition is `worker.storage.store_results`;
- progress that cannot be reported (database or broker away) is skipped, never fatal.

No torch here: the API process imports the delivery package.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import UTC, datetime
from typing import Self

from sqlalchemy import Update, delete, or_, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from backend.db.models import EpochMetric, Run, Training
from backend.db.session import session_scope
from backend.delivery.leases import (
    LeaseTerms,
    deliveries_since_retry,
    exhausted_reason,
    fail_training,
    lease_expired,
)
from backend.experiments.service import TERMINAL, refresh_experiment_status

log = logging.getLogger("orrery.jobs")
TRAINING_SHARE = 0.98  # of a run's progress bar; simulation is the rest


def _now() -> datetime:
    return datetime.now(UTC)


def lease_held(training_id: int, attempt: int):  # type: ignore[no-untyped-def]
    """SQL condition: the training is still running under this attempt's lease."""
    return (
        (Training.id == training_id)
        & (Training.attempts == attempt)
        & (Training.status == "running")
    )


def claim_training(
    db: Session, training_id: int, task_id: str | None, terms: LeaseTerms = LeaseTerms()
) -> int | None:
    """Take the lease for this task; the attempt number (fencing token), or None when the
    training is finished, cancelled, out of attempts, or leased to a live delivery."""
    now = _now()
    # A running training is claimable only once its lease expired, even for a redelivery of
    # the same task (its process may be alive and only cut off from the broker): one live
    # holder at a time; a dead one is noticed by its lease.
    claimable = or_(
        Training.status == "queued", (Training.status == "running") & lease_expired(terms, now)
    )
    attempt = db.execute(
        update(Training)
        .where(
            Training.id == training_id,
            claimable,
            Training.cancel_requested.is_(False),
            deliveries_since_retry() < terms.max_attempts,
        )
        .values(
            status="running",
            task_id=task_id,
            attempts=Training.attempts + 1,
            started_at=now,
            heartbeat_at=now,
            leased_by=f"{socket.gethostname()}:{os.getpid()}",
            progress=0.0,
            error=None,
        )
        .returning(Training.attempts)
    ).scalar_one_or_none()
    if attempt is None:
        # Claimable but out of deliveries: a training that kills its worker every time.
        exhausted = db.execute(
            select(Training.attempts, deliveries_since_retry()).where(
                Training.id == training_id,
                claimable,
                deliveries_since_retry() >= terms.max_attempts,
            )
        ).first()
        if exhausted is not None:
            token, deliveries = exhausted
            fail_training(db, training_id, token, exhausted_reason(deliveries, terms))
        return None
    db.execute(
        update(Run)
        .where(Run.training_id == training_id, Run.status.in_(("queued", "running")))
        .values(status="running", started_at=now, progress=0.0)
    )
    # A delivery trains from its first epoch: epochs an earlier one stored are not its own.
    db.execute(delete(EpochMetric).where(EpochMetric.training_id == training_id))
    return attempt


class Lease:
    """Renews one delivery's lease from a thread until stopped; notices when it is lost.
    Subclasses say which row the lease is on (`renewal`: the UPDATE that renews it, conditional
    on the lease still being held)."""

    def __init__(self, database_url: str, label: str, interval: float) -> None:
        self.database_url = database_url
        self.label = label
        self.interval = interval
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease", daemon=True)

    def renewal(self) -> Update:
        raise NotImplementedError

    def renew(self) -> None:
        try:
            with session_scope(self.database_url) as db:
                renewed = db.execute(self.renewal()).rowcount
        except SQLAlchemyError as exc:  # the database is away: the lease may expire meanwhile
            log.warning("%s: heartbeat not recorded: %s", self.label, exc)
            return
        if not renewed:
            log.warning("%s lost its lease; stopping", self.label)
            self.lost.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.renew()
            if self.lost.is_set():
                return

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


class TrainingLease(Lease):
    """The lease of one delivery of a training."""

    def __init__(self, database_url: str, training_id: int, attempt: int, interval: float) -> None:
        super().__init__(database_url, f"training {training_id}: attempt {attempt}", interval)
        self.training_id = training_id
        self.attempt = attempt

    def renewal(self) -> Update:
        return (
            update(Training)
            .where(lease_held(self.training_id, self.attempt))
            .values(heartbeat_at=_now())
        )


def report_progress(database_url: str, training_id: int, attempt: int, fraction: float) -> None:
    with session_scope(database_url) as db:
        held = db.execute(
            update(Training).where(lease_held(training_id, attempt)).values(progress=fraction)
        ).rowcount
        if held:
            db.execute(
                update(Run)
                .where(Run.training_id == training_id, Run.status == "running")
                .values(progress=fraction * TRAINING_SHARE)
            )


def cancellation_requested(database_url: str, training_id: int) -> bool:
    with session_scope(database_url) as db:
        return bool(db.scalar(select(Training.cancel_requested).where(Training.id == training_id)))


def finish_unsuccessfully(
    database_url: str, training_id: int, attempt: int | None, status: str, error: str
) -> None:
    """End the training and its open runs; with an attempt, only while it holds the lease."""
    with session_scope(database_url) as db:
        condition = Training.id == training_id
        if attempt is not None:
            condition = condition & (Training.attempts == attempt)
        ended = db.execute(
            update(Training)
            .where(condition, Training.status.not_in(TERMINAL))
            .values(status=status, error=error, finished_at=_now(), heartbeat_at=None)
        ).rowcount
        if attempt is not None and not ended:
            return
        db.execute(
            update(Run)
            .where(Run.training_id == training_id, Run.status.not_in(TERMINAL))
            .values(status=status, error=error, finished_at=_now())
        )
        experiment_id = db.scalar(select(Training.experiment_id).where(Training.id == training_id))
        if experiment_id is not None:
            refresh_experiment_status(db, experiment_id)
