"""Leases on trainings: who holds one, when it has expired, and what happens then.

A worker that claims a training holds a *lease* on it: the claim increments the training's
`attempts`, and that number is the worker's fencing token. While the worker trains it writes
`heartbeat_at` every third of the lease; every write it makes (heartbeat, progress, results)
is conditional on the training still being `running` under its token. A training whose heartbeat
is older than the lease has lost its worker, whatever the reason (the worker was SIGKILLed or
stopped, the broker lost its message, its database connection dropped): the reconciler takes it
back, so that it is delivered again with a new task id (the next claim makes attempts + 1), or,
once `max_attempts` deliveries have been claimed, fails it with the reason. A retry of a failed
or cancelled run (`backend.experiments.retry`) adds one to `attempts` itself, superseding any
delivery still holding an older token, and the limit counts the deliveries after it. A worker
whose lease was taken back can no longer write, so a training's results are stored exactly once.

Worker processes also beat, whether or not they train: that is `backend.delivery.liveness`.

Clocks: heartbeats carry the writing host's UTC time and the reconciler compares them with its
own, so hosts must agree to well within a lease (NTP).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from backend.db.models import Run, Training
from backend.experiments.service import TERMINAL, refresh_experiment_status
from backend.settings import Settings


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class LeaseTerms:
    """How long a heartbeat stays valid and how many deliveries a training gets."""

    lease_seconds: float = 120.0
    max_attempts: int = 3

    @classmethod
    def of(cls, settings: Settings) -> LeaseTerms:
        return cls(settings.lease_seconds, settings.max_attempts)

    @property
    def heartbeat_interval(self) -> float:
        return self.lease_seconds / 3

    def cutoff(self, now: datetime | None = None) -> datetime:
        """Heartbeats older than this have expired."""
        return (now or utcnow()) - timedelta(seconds=self.lease_seconds)


def lease_expired(terms: LeaseTerms, now: datetime | None = None):  # type: ignore[no-untyped-def]
    """SQL condition: a running training's lease has expired (no heartbeat for a lease)."""
    cutoff = terms.cutoff(now)
    return or_(
        Training.heartbeat_at < cutoff,
        and_(Training.heartbeat_at.is_(None), Training.started_at < cutoff),
        and_(Training.heartbeat_at.is_(None), Training.started_at.is_(None)),
    )


def deliveries_since_retry():  # type: ignore[no-untyped-def]
    """SQL expression: deliveries claimed since the training was last retried (or created)."""
    return Training.attempts - Training.attempts_at_retry


def exhausted_reason(attempts: int, terms: LeaseTerms) -> str:
    return (
        f"gave up after {attempts} attempts (limit {terms.max_attempts}): each time its worker "
        f"stopped sending heartbeats for {terms.lease_seconds:g} s (worker killed or stopped, "
        "broker message lost, or database unreachable)"
    )


def fail_training(db: Session, training_id: int, attempt: int, reason: str) -> bool:
    """Fail a training and its open runs with `reason`, if it is still at this attempt."""
    now = utcnow()
    failed = db.execute(
        update(Training)
        .where(
            Training.id == training_id,
            Training.attempts == attempt,
            Training.status.not_in(TERMINAL),
        )
        .values(status="failed", error=reason, finished_at=now, heartbeat_at=None)
    ).rowcount
    if not failed:
        return False
    db.execute(
        update(Run)
        .where(Run.training_id == training_id, Run.status.not_in(TERMINAL))
        .values(status="failed", error=reason, finished_at=now)
    )
    experiment_id = db.scalar(select(Training.experiment_id).where(Training.id == training_id))
    if experiment_id is not None:
        refresh_experiment_status(db, experiment_id)
    return True


@dataclass
class TakenBack:
    requeued: list[Training] = field(default_factory=list)  # to be sent again
    failed: list[int] = field(default_factory=list)


def take_back_expired(db: Session, terms: LeaseTerms) -> TakenBack:
    """Requeue (or, past the attempt limit, fail) every running training whose lease expired.

    Each change is conditional on the attempt and the expired heartbeat read here, so a worker
    that beats in between keeps its lease. The caller commits and sends the requeued ones.
    """
    now = utcnow()
    expired = db.execute(
        select(
            Training.id, Training.attempts, deliveries_since_retry(), Training.experiment_id
        ).where(Training.status == "running", lease_expired(terms, now))
    ).all()
    result = TakenBack()
    for training_id, attempts, deliveries, experiment_id in expired:
        if deliveries >= terms.max_attempts:
            if fail_training(db, training_id, attempts, exhausted_reason(deliveries, terms)):
                result.failed.append(training_id)
            continue
        requeued = db.execute(
            update(Training)
            .where(
                Training.id == training_id,
                Training.attempts == attempts,
                Training.status == "running",
                lease_expired(terms, now),
            )
            .values(status="queued", heartbeat_at=None, progress=0.0)
        ).rowcount
        if requeued:
            db.execute(
                update(Run)
                .where(Run.training_id == training_id, Run.status == "running")
                .values(status="queued", progress=0.0)
            )
            refresh_experiment_status(db, experiment_id)
            training = db.get(Training, training_id)
            if training is not None:
                result.requeued.append(training)
    return result
