"""The job runner: claim a training, train it under its lease, store what it did.

One Celery task run is one *delivery*. How a delivery claims its training and holds the lease
is `backend.delivery.claims`; how each epoch is stored as it is measured and the results at
the end (each write fenced by the lease) is `worker.storage`. This module only orders the steps
and turns their outcome into the task's answer. A training already done is not trained again:
its open runs are simulated on the stored workload (a retried run of a finished training).

Deterministic failures end the training at once, with the real reason: a training config that
no longer validates, a training that raises ValueError/RuntimeError, and a result that cannot be
stored because of what it is (`DETERMINISTIC_STORE_ERRORS`: a non-finite simulated figure, an
accelerator config that does not validate, an arithmetic error in the simulator, a value the
database refuses). Delivering those again would fail the same way: left to the lease, the
training would be delivered `max_attempts` times and then failed as a worker that "stopped
sending heartbeats", which would be false. Anything else raised while storing (the database
away: OperationalError, which the task retries; a crash) is left to the lease: the training is
delivered again, as for a lost worker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sqlalchemy.exc import DataError, IntegrityError, SQLAlchemyError

from backend.db.models import Training
from backend.db.session import session_scope
from backend.delivery.claims import (
    TrainingLease,
    cancellation_requested,
    claim_training,
    finish_unsuccessfully,
    report_progress,
)
from backend.delivery.leases import LeaseTerms
from backend.experiments.service import refresh_experiment_status
from backend.settings import get_settings
from backend.specs.techniques import parse_techniques
from backend.specs.training import TrainingConfig
from backend.training import EpochMetrics, Progress, TrainingCancelled, run_training
from worker.storage import (
    DID_NOT_LEARN_MARGIN,
    simulate_pending_runs,
    store_epoch,
    store_results,
)

log = logging.getLogger("orrery.jobs")
PROGRESS_INTERVAL = 1.0  # seconds between progress writes and cancellation reads
# Store errors that another delivery would meet again (NonFiniteResult and pydantic's
# ValidationError are ValueErrors; ArithmeticError: the simulator divided by zero or overflowed;
# DataError and IntegrityError: the database refused a value).
DETERMINISTIC_STORE_ERRORS: tuple[type[Exception], ...] = (
    ValueError,
    ArithmeticError,
    DataError,
    IntegrityError,
)


def store_failure_reason(exc: Exception) -> str:
    """The reason a deterministic store error gives the training: the error's own words."""
    if isinstance(exc, SQLAlchemyError):
        original = getattr(exc, "orig", None)
        detail = str(original if original is not None else exc).strip().splitlines()[0]
        return f"results could not be stored: {type(exc).__name__}: {detail}"
    return (
        str(exc) if str(exc).startswith("simulation produced") else f"{type(exc).__name__}: {exc}"
    )


class Throttle:
    """Lets a call through at most once per interval (the first call always passes)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last = float("-inf")

    def ready(self) -> bool:
        now = time.monotonic()
        if now - self._last < self.interval:
            return False
        self._last = now
        return True


def run_training_job(
    database_url: str,
    training_id: int,
    task_id: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    did_not_learn_margin: float = DID_NOT_LEARN_MARGIN,
    terms: LeaseTerms = LeaseTerms(),
    on_claimed: Callable[[], None] | None = None,
) -> str:
    """Train under a lease, then store everything at once; return what became of the training
    ("done", "failed", "cancelled", "superseded" when its lease was lost, or the status of a
    training this delivery could not claim). `on_claimed` is called once the claim committed
    (the training left the broker's backlog: the worker dispatches the next one)."""
    with session_scope(database_url) as db:
        training = db.get(Training, training_id)
        if training is None:
            return "missing"
        if training.status == "done":
            attempt = None
        else:
            attempt = claim_training(db, training_id, task_id, terms)
            if attempt is not None:
                refresh_experiment_status(db, training.experiment_id)
        training_config, technique_params = training.training_config, training.technique_params
        db.refresh(training)
        cancel_requested, status = training.cancel_requested, training.status
    if status == "done":
        try:
            simulate_pending_runs(database_url, training_id, did_not_learn_margin)
        except DETERMINISTIC_STORE_ERRORS as exc:  # fails its open runs; the training stays done
            log.warning("training %s: open runs not stored: %s", training_id, exc)
            reason = store_failure_reason(exc)
            finish_unsuccessfully(database_url, training_id, None, "failed", reason)
            return "failed"
        return "done"
    if attempt is None:
        if cancel_requested:
            finish_unsuccessfully(database_url, training_id, None, "cancelled", "cancelled")
            return "cancelled"
        return status
    if on_claimed is not None:
        on_claimed()
    try:
        config = TrainingConfig.model_validate(training_config)
        techniques = parse_techniques(technique_params)
    except ValueError as exc:  # a row no longer valid (written by hand, or by an old version)
        reason = f"invalid training: {type(exc).__name__}: {exc}"
        finish_unsuccessfully(database_url, training_id, attempt, "failed", reason)
        return "failed"

    with TrainingLease(database_url, training_id, attempt, terms.heartbeat_interval) as lease:
        progress_throttle, cancel_throttle = (
            Throttle(PROGRESS_INTERVAL),
            Throttle(PROGRESS_INTERVAL),
        )

        def progress(update_: Progress) -> None:
            if not progress_throttle.ready():
                return
            try:
                report_progress(database_url, training_id, attempt, update_.fraction)
                if on_progress is not None:
                    on_progress(update_)
            except Exception as exc:  # progress is a courtesy; the training goes on
                log.warning("training %s: progress not reported: %s", training_id, exc)

        def should_cancel() -> bool:
            if lease.lost.is_set():
                return True
            if not cancel_throttle.ready():
                return False
            try:
                return cancellation_requested(database_url, training_id)
            except SQLAlchemyError:
                return False

        def on_epoch(epoch: EpochMetrics) -> None:
            try:
                store_epoch(database_url, training_id, attempt, epoch)
            except SQLAlchemyError as exc:  # like progress: the results store every epoch
                log.warning("training %s: epoch %s not stored: %s", training_id, epoch.epoch, exc)

        try:
            result = run_training(
                config,
                techniques,
                progress=progress,
                should_cancel=should_cancel,
                on_epoch=on_epoch,
                data_root=get_settings().effective_data_root,
                fashion_mnist_dir=get_settings().fashion_mnist_dir,
            )
        except TrainingCancelled as exc:
            if lease.lost.is_set():  # taken back, or cancelled (which also ends the lease)
                return "superseded"
            finish_unsuccessfully(database_url, training_id, attempt, "cancelled", str(exc))
            return "cancelled"
        except (ValueError, RuntimeError) as exc:  # bad data, a missing data set, a torch error
            reason = f"{type(exc).__name__}: {exc}"
            finish_unsuccessfully(database_url, training_id, attempt, "failed", reason)
            return "failed"
    try:
        with session_scope(database_url) as db:  # rolled back whole on any error
            stored = store_results(db, training_id, attempt, result, did_not_learn_margin)
    except DETERMINISTIC_STORE_ERRORS as exc:
        reason = store_failure_reason(exc)
        log.warning("training %s: attempt %s failed storing: %s", training_id, attempt, reason)
        finish_unsuccessfully(database_url, training_id, attempt, "failed", reason)
        return "failed"
    if not stored:
        log.warning("training %s: attempt %s was superseded; results dropped", training_id, attempt)
        return "superseded"
    return "done"
